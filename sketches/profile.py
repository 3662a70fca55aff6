"""Window profiles: the per (model, model version, window) summary of prediction traffic.

A :class:`WindowProfile` holds the record count, the records per model version,
per-feature profiles (:class:`~sketches.feature.FeatureProfile`), sketches of the
score, the predicted label and the serving latency, and per slice key a capped
set of slice sub-profiles (:mod:`sketches.slices`) holding the score, the
predicted label and the features named in ``slice_features``, and the co-moments
of the model's numeric features taken together (:mod:`sketches.comoments`: complete
rows, mean vector, scatter matrix; not kept in slice sub-profiles). Profiles merge
exactly (counts, min, max, moments) or within sketch bounds (t-digest,
frequent items, count-min, CPC), so partial profiles from any number of
aggregator replicas, or the 5-minute windows of an hour, combine into the
profile a single pass would give.

Serialized form: :mod:`sketches.codec` (versioned, Zstandard-compressed MessagePack).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from sdk.columns import RecordColumns
from sdk.record import PredictionRecord
from sketches.bins import SCORE_EDGES, BinCounts
from sketches.categorical import CategoricalSketch, category_key
from sketches.codec import CHECKPOINT_LEVEL, PROFILE_FORMAT_VERSION, decode, encode
from sketches.columns import subset
from sketches.comoments import CoMoments, number_arrays
from sketches.feature import Column, FeatureProfile, escape_strings
from sketches.numeric import NumericSketch
from sketches.slices import MAX_SLICE_VALUES, SliceSet
from sketches.tdigest import TDigest, compress_all
from sketches.vector import VectorProfile, clean_vectors

__all__ = ["PROFILE_FORMAT_VERSION", "FeatureProfile", "WindowProfile"]

def _update_numeric(sketch: NumericSketch, column: Column | None, n: int) -> None:
    if column is None:
        sketch.add_nulls(n)
    else:  # None -> NaN, counted as missing by the sketch
        sketch.update(column if isinstance(column, np.ndarray) else np.array(column, dtype=np.float64))


def _update_labels(sketch: CategoricalSketch, labels: Sequence[Any] | None, n: int) -> None:
    if labels is None:
        sketch.add_nulls(n)
        return
    if set(map(type, labels)) <= {str, type(None)}:
        counts = escape_strings(Counter(labels))
    else:  # ints and bools: keyed with their type, so True, 1 and "1" stay apart
        counts = Counter(None if v is None else category_key(v) for v in labels)
    sketch.add_nulls(counts.pop(None, 0))
    sketch.update_counts(counts)


class WindowProfile:
    """Profile of one model's traffic in one event-time window.

    Parameters
    ----------
    model_id : str
    window_start : int
        Window start, Unix seconds (0 for a reference profile).
    window_seconds : int
        Window length in seconds (0 for a reference profile).
    slice_features : Sequence[str]
        Features profiled in each slice sub-profile besides score and label.
    max_slice_values : int
        Slice values per slice key with their own sub-profile; the rest share
        ``"__other__"``.
    bins : Mapping[str, BinCounts], optional
        Per numeric feature (``"__score__"`` for the score), the bin edges its
        values are also counted in exactly (:mod:`sketches.bins`; empty
        templates, copied for each feature). Not applied to slice sub-profiles.
    multivariate : bool
        Keep the co-moments of the numeric features (:attr:`comoments`); slice
        sub-profiles do not.

    Examples
    --------
    >>> from sdk.record import PredictionRecord
    >>> p = WindowProfile("m", 0, 300)
    >>> p.add_records([PredictionRecord("m", "1", "a", 1.0, {"x": 1.0, "c": "u"}, score=0.2,
    ...                                 slices={"country": "DE"}),
    ...                PredictionRecord("m", "1", "b", 2.0, {"x": None}, score=0.4)])
    >>> p.count, p.features["x"].null_count, p.features["c"].null_count
    (2, 1, 1)
    >>> q = WindowProfile.from_bytes(p.to_bytes())
    >>> q.features["c"].categorical.frequencies(), q.slices["country"].profiles["DE"].score.mean
    ({'u': 1}, 0.2)
    >>> q.comoments.names, q.comoments.n, q.comoments.excluded
    (('x',), 1, 1)
    """

    def __init__(self, model_id: str, window_start: int, window_seconds: int, *,
                 slice_features: Sequence[str] = (),
                 max_slice_values: int = MAX_SLICE_VALUES,
                 bins: Mapping[str, BinCounts] | None = None,
                 multivariate: bool = True) -> None:
        self.model_id = model_id
        self.bins = dict(bins or {})
        self.window_start = window_start
        self.window_seconds = window_seconds
        self.slice_features = tuple(slice_features)
        self.max_slice_values = max_slice_values
        self.count = 0
        self.versions: Counter[str] = Counter()
        self.features: dict[str, FeatureProfile] = {}
        self.score = NumericSketch.binned(self._bins_of(SCORE_EDGES))
        self.prediction = CategoricalSketch()
        self.latency = NumericSketch()
        self.slices: dict[str, SliceSet[WindowProfile]] = {}
        self.comoments: CoMoments | None = CoMoments() if multivariate else None
        self.vectors: dict[str, VectorProfile] = {}

    @property
    def window_end(self) -> int:
        """Window end (exclusive), Unix seconds."""
        return self.window_start + self.window_seconds

    @property
    def is_empty(self) -> bool:
        """True when the profile holds no record: "insufficient data"."""
        return self.count == 0

    def adopt_bins(self, bins: Mapping[str, BinCounts] | None) -> None:
        """Count the features first seen from now on in ``bins`` (empty templates), when the
        profile has no templates: one read back from bytes (an aggregator's checkpoint) keeps
        the bins of the features it holds, but not the templates (:meth:`from_dict`).

        Examples
        --------
        >>> p = WindowProfile.from_bytes(WindowProfile("m", 0, 300).to_bytes())
        >>> p.adopt_bins({"x": BinCounts(np.array([0.0]))})
        >>> p._feature("x").numeric.bins.counts.tolist()
        [0, 0]
        """
        if not self.bins and bins:
            self.bins = dict(bins)

    def _bins_of(self, name: str) -> BinCounts | None:
        t = self.bins.get(name)
        return None if t is None else t.empty_like(source=t.source)

    def edge_set(self) -> dict[str, np.ndarray]:
        """Per numeric feature (and ``"__score__"``) counted in bins, its inner edges."""
        out = {name: f.numeric.bins.edges for name, f in self.features.items()
               if f.numeric.bins is not None and f.kind == "numeric"}
        if self.score.bins is not None and self.score.count:
            out[SCORE_EDGES] = self.score.bins.edges
        return out

    def _sub_profile(self) -> WindowProfile:
        return WindowProfile(self.model_id, self.window_start, self.window_seconds,
                             multivariate=False)

    def _feature(self, name: str) -> FeatureProfile:
        feature = self.features.get(name)
        if feature is None:
            feature = self.features[name] = FeatureProfile()
            feature.numeric.bins = self._bins_of(name)
            feature.missing += self.count  # earlier records lacked it
        return feature

    def _slice_set(self, key: str) -> SliceSet[WindowProfile]:
        s = self.slices.get(key)
        if s is None:
            s = self.slices[key] = SliceSet(self.max_slice_values, self._sub_profile)
        return s

    # -- building -------------------------------------------------------------
    def add_records(self, records: Iterable[PredictionRecord]) -> None:
        """Add records (assumed to belong to this model and window).

        Equivalent to ``add_columns(RecordColumns.from_records(model_id, records))``.
        """
        self.add_columns(RecordColumns.from_records(self.model_id, records))

    def add_columns(self, cols: RecordColumns) -> None:
        """Add records given as columns (assumed to belong to this model and window).

        Parameters
        ----------
        cols : sdk.columns.RecordColumns
            Feature columns may be lists (None missing) or numpy arrays (NaN
            missing); see :meth:`FeatureProfile.update
            <sketches.feature.FeatureProfile.update>`. A feature absent from
            ``cols`` is missing in all its records.
        """
        n = len(cols)
        if not n:
            return
        self.versions.update(cols.model_version)
        hints = cols.feature_types
        features = cols.features if self.comoments is None else number_arrays(cols.features, hints)
        for name, column in features.items():
            self._feature(name).update(column, hints.get(name), cols.distinct.get(name))
        for name, feature in self.features.items():
            if name not in cols.features:
                feature.missing += n
        _update_numeric(self.score, cols.score, n)
        _update_numeric(self.latency, cols.latency_ms, n)
        _update_labels(self.prediction, cols.predicted_label, n)
        if self.comoments is not None:
            self.comoments.update(features, hints, n)
        self.count += n
        self._add_vectors(cols, n)
        for key, values in cols.slices.items():
            for sub, rows in self._slice_set(key).route(values):
                sub.add_columns(subset(cols, rows, self.slice_features))

    def _add_vectors(self, cols: RecordColumns, n: int) -> None:
        """Profile the vector columns (:mod:`sketches.vector`). A vector that is not finite or not
        of the feature's dimension (that of its first vector) counts as missing: the aggregator
        drops and counts those before (:func:`sketches.vector.clean_vectors`)."""
        for name, column in cols.vectors.items():
            vp = self.vectors.get(name)
            clean = clean_vectors(column, name, None if vp is None else vp.dim)
            if vp is None:
                if not clean.rows.size:
                    continue
                vp = self.vectors[name] = VectorProfile(clean.matrix.shape[1])
                vp.add_nulls(self.count - n)  # earlier records lacked it
            pid = cols.prediction_id
            vp.update(clean.matrix, [pid[i] for i in clean.rows.tolist()])
            vp.add_nulls(n - clean.rows.size)
        for name, vp in self.vectors.items():
            if name not in cols.vectors:
                vp.add_nulls(n)

    def merge(self, other: WindowProfile) -> WindowProfile:
        """Merge ``other`` into this profile (in place) and return ``self``.

        ``other`` is not modified. Slice sub-profiles follow this profile's
        slice configuration. Co-moments merge exactly when both sides keep them
        (:meth:`CoMoments.merge <sketches.comoments.CoMoments.merge>`); when ``other``
        has none (a profile of format 3), this profile's block no longer describes
        all its rows and is dropped.
        """
        for name, feature in other.features.items():
            self._feature(name).merge(feature)
        for name, feature in self.features.items():
            if name not in other.features:
                feature.missing += other.count
        self.count += other.count
        self.versions.update(other.versions)
        self.score.merge(other.score)
        self.prediction.merge(other.prediction)
        self.latency.merge(other.latency)
        if self.comoments is not None:
            self.comoments = None if other.comoments is None else self.comoments.merge(other.comoments)
        for key, s in other.slices.items():
            self._slice_set(key).merge(s)
        for name, vp in other.vectors.items():
            mine = self.vectors.get(name)
            if mine is None:
                mine = self.vectors[name] = VectorProfile(vp.dim, vp.k, vp.seed)
                mine.add_nulls(self.count - other.count)  # this profile's records lacked it
            if mine.compatible(vp):
                mine.merge(vp)
            else:  # another dimension (an undeclared feature whose first vectors differed): missing here
                mine.add_nulls(vp.count + vp.nulls)
        for name, vp in self.vectors.items():
            if name not in other.vectors:
                vp.add_nulls(other.count)
        return self

    # -- serialisation ----------------------------------------------------------
    def to_dict(self, *, compress: bool = True) -> dict[str, Any]:
        """Plain-data form (for MessagePack); see :meth:`from_dict`.

        ``compress=False`` may leave the t-digests' buffered values uncompressed
        (:meth:`TDigest.to_dict <sketches.tdigest.TDigest.to_dict>`): cheaper for
        state written often, and read back into the same buffered state.
        """
        d = {
            "model": self.model_id,
            "start": self.window_start,
            "len": self.window_seconds,
            "n": self.count,
            "versions": dict(self.versions),
            "features": {k: f.to_dict(compress=compress) for k, f in self.features.items()},
            "score": self.score.to_dict(compress=compress),
            "prediction": self.prediction.to_dict(),
            "latency": self.latency.to_dict(compress=compress),
            "slice_features": list(self.slice_features),
            "max_slice_values": self.max_slice_values,
            "slices": {k: s.to_dict(lambda p: p.to_dict(compress=compress))
                       for k, s in self.slices.items()},
            "vectors": {k: v.to_dict(compress=compress) for k, v in self.vectors.items()},
        }
        if self.comoments is not None:
            d["mv"] = self.comoments.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WindowProfile:
        """Inverse of :meth:`to_dict`."""
        p = cls(d["model"], d["start"], d["len"], slice_features=d["slice_features"],
                max_slice_values=d["max_slice_values"], multivariate="mv" in d)
        p.count = d["n"]
        p.versions = Counter(d["versions"])
        p.features = {k: FeatureProfile.from_dict(v) for k, v in d["features"].items()}
        p.score = NumericSketch.from_dict(d["score"])
        p.prediction = CategoricalSketch.from_dict(d["prediction"])
        p.latency = NumericSketch.from_dict(d["latency"])
        if "mv" in d:
            p.comoments = CoMoments.from_dict(d["mv"])
        p.slices = {k: SliceSet.from_dict(v, p._sub_profile, WindowProfile.from_dict)
                    for k, v in d["slices"].items()}
        p.vectors = {k: VectorProfile.from_dict(v) for k, v in d.get("vectors", {}).items()}
        return p

    def to_bytes(self, *, fast: bool = False) -> bytes:
        """Serialize (format ``PROFILE_FORMAT_VERSION``, see :mod:`sketches.codec`).

        ``fast`` is for state rewritten often and kept briefly, such as the
        aggregator's checkpoints of open windows: t-digests' buffered values are
        written uncompressed (``to_dict(compress=False)``) rather than compressed
        at every write, and the document is compressed at Zstandard's faster
        ``CHECKPOINT_LEVEL``. Both read back with :meth:`from_bytes`.
        """
        if fast:
            return encode(self.to_dict(compress=False), CHECKPOINT_LEVEL)
        compress_all(self._digests())
        return encode(self.to_dict())

    def _digests(self) -> Iterator[TDigest]:
        """The t-digests of this profile's numeric sketches in sketch mode, its slices' too."""
        for sketch in (*(f.numeric for f in self.features.values()), self.score, self.latency):
            if sketch.digest is not None:
                yield sketch.digest
        for s in self.slices.values():
            for sub in s.profiles.values():
                yield from sub._digests()

    @classmethod
    def from_bytes(cls, data: bytes) -> WindowProfile:
        """Inverse of :meth:`to_bytes`.

        Raises
        ------
        ValueError
            If the bytes are not a profile of a known format version.
        """
        return cls.from_dict(decode(data))
