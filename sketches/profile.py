"""Window profiles: the per (model, model version, window) summary of prediction traffic.

A :class:`WindowProfile` holds the record count, per-feature profiles, and
sketches of the score, the predicted label and the serving latency. Profiles
merge exactly (counts) or within sketch bounds (t-digest, frequent items,
HLL), so partial profiles from any number of aggregator replicas, or the 5-minute
windows of an hour, combine into the profile a single pass would give.

Serialized form: MessagePack of ``{"fmt": PROFILE_FORMAT_VERSION, ...}``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal

import msgpack
import numpy as np

from sdk.record import PredictionRecord
from sketches.categorical import CategoricalSketch
from sketches.numeric import NumericSketch

PROFILE_FORMAT_VERSION = 1
Kind = Literal["numeric", "categorical", "empty"]


def _label(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


class FeatureProfile:
    """One feature in one window: missing values plus numeric and categorical parts.

    Numbers (int, float) go to :attr:`numeric`; strings and booleans to
    :attr:`categorical`. A feature's :attr:`kind` is the part holding most
    values; values of the other part count as type mismatches. ``None``, an
    absent key and NaN are missing values; ``+/-inf`` are counted apart.
    """

    __slots__ = ("missing", "numeric", "categorical")

    def __init__(self) -> None:
        self.missing = 0
        self.numeric = NumericSketch()
        self.categorical = CategoricalSketch()

    def update(self, values: list[Any]) -> None:
        """Add raw values of one column (numbers, strings, bools, None)."""
        nums: list[float] = []
        cats: list[str] = []
        missing = 0
        for v in values:
            t = type(v)
            if t is float or t is int:
                nums.append(v)
            elif t is str:
                cats.append(v)
            elif v is None:
                missing += 1
            elif t is bool:
                cats.append("true" if v else "false")
            else:  # int / float subclasses such as numpy scalars
                nums.append(float(v))
        self.missing += missing
        if nums:
            self.numeric.update(np.fromiter(nums, dtype=np.float64, count=len(nums)))
        if cats:
            self.categorical.update(cats)

    def merge(self, other: FeatureProfile) -> None:
        """Merge ``other`` into this profile (in place)."""
        self.missing += other.missing
        self.numeric.merge(other.numeric)
        self.categorical.merge(other.categorical)

    @property
    def null_count(self) -> int:
        """Missing values: None, absent key, NaN."""
        return self.missing + self.numeric.null_count

    @property
    def inf_count(self) -> int:
        """Values equal to +inf or -inf."""
        return self.numeric.pos_inf_count + self.numeric.neg_inf_count

    @property
    def numeric_total(self) -> int:
        return self.numeric.count + self.inf_count

    @property
    def kind(self) -> Kind:
        """``"numeric"``, ``"categorical"``, or ``"empty"`` when no value is present."""
        if self.numeric_total == 0 and self.categorical.count == 0:
            return "empty"
        return "numeric" if self.numeric_total >= self.categorical.count else "categorical"

    @property
    def type_mismatch_count(self) -> int:
        """Values whose type differs from the feature's kind."""
        return min(self.numeric_total, self.categorical.count)

    @property
    def total(self) -> int:
        """All values, missing included."""
        return self.null_count + self.numeric_total + self.categorical.count

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"miss": self.missing}
        if self.numeric.count or self.numeric.null_count or self.inf_count:
            d["num"] = self.numeric.to_dict()
        if self.categorical.count:
            d["cat"] = self.categorical.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FeatureProfile:
        f = cls()
        f.missing = d["miss"]
        if "num" in d:
            f.numeric = NumericSketch.from_dict(d["num"])
        if "cat" in d:
            f.categorical = CategoricalSketch.from_dict(d["cat"])
        return f


class WindowProfile:
    """Profile of one model's traffic in one event-time window.

    Parameters
    ----------
    model_id : str
    window_start : int
        Window start, Unix seconds (0 for a reference profile).
    window_seconds : int
        Window length in seconds (0 for a reference profile).

    Examples
    --------
    >>> from sdk.record import PredictionRecord
    >>> p = WindowProfile("m", 0, 300)
    >>> p.add_records([PredictionRecord("m", "1", "a", 1.0, {"x": 1.0, "c": "u"}, score=0.2),
    ...                PredictionRecord("m", "1", "b", 2.0, {"x": None}, score=0.4)])
    >>> p.count, p.features["x"].null_count, p.features["c"].null_count
    (2, 1, 1)
    >>> WindowProfile.from_bytes(p.to_bytes()).features["c"].categorical.frequencies()
    {'u': 1}
    """

    def __init__(self, model_id: str, window_start: int, window_seconds: int) -> None:
        self.model_id = model_id
        self.window_start = window_start
        self.window_seconds = window_seconds
        self.count = 0
        self.versions: Counter[str] = Counter()
        self.features: dict[str, FeatureProfile] = {}
        self.score = NumericSketch()
        self.prediction = CategoricalSketch()
        self.latency = NumericSketch()

    @property
    def window_end(self) -> int:
        return self.window_start + self.window_seconds

    @property
    def is_empty(self) -> bool:
        """True when the profile holds no record: "insufficient data"."""
        return self.count == 0

    def add_records(self, records: Iterable[PredictionRecord]) -> None:
        """Add records (assumed to belong to this model and window)."""
        records = list(records)
        n = len(records)
        if not n:
            return
        columns: dict[str, list[Any]] = {}
        scores: list[float] = []
        latencies: list[float] = []
        labels: list[str] = []
        for r in records:
            self.versions[r.model_version] += 1
            for k, v in r.features.items():
                col = columns.get(k)
                if col is None:
                    columns[k] = [v]
                else:
                    col.append(v)
            if r.score is not None:
                scores.append(r.score)
            if r.latency_ms is not None:
                latencies.append(r.latency_ms)
            if r.predicted_label is not None:
                labels.append(_label(r.predicted_label))
        for name, col in columns.items():
            feature = self.features.get(name)
            if feature is None:
                feature = self.features[name] = FeatureProfile()
                feature.missing += self.count  # earlier records lacked it
            feature.update(col)
            feature.missing += n - len(col)
        for name, feature in self.features.items():
            if name not in columns:
                feature.missing += n
        self.score.update(np.array(scores, dtype=np.float64))
        self.score.add_nulls(n - len(scores))
        self.latency.update(np.array(latencies, dtype=np.float64))
        self.latency.add_nulls(n - len(latencies))
        self.prediction.update(labels)
        self.prediction.add_nulls(n - len(labels))
        self.count += n

    def merge(self, other: WindowProfile) -> WindowProfile:
        """Merge ``other`` into this profile (in place) and return ``self``."""
        for name, feature in other.features.items():
            mine = self.features.get(name)
            if mine is None:
                mine = self.features[name] = FeatureProfile()
                mine.missing += self.count
            mine.merge(feature)
        for name, feature in self.features.items():
            if name not in other.features:
                feature.missing += other.count
        self.count += other.count
        self.versions.update(other.versions)
        self.score.merge(other.score)
        self.prediction.merge(other.prediction)
        self.latency.merge(other.latency)
        return self

    def to_bytes(self) -> bytes:
        """Serialize (MessagePack, format ``PROFILE_FORMAT_VERSION``)."""
        return msgpack.packb(
            {
                "fmt": PROFILE_FORMAT_VERSION,
                "model": self.model_id,
                "start": self.window_start,
                "len": self.window_seconds,
                "n": self.count,
                "versions": dict(self.versions),
                "features": {k: f.to_dict() for k, f in self.features.items()},
                "score": self.score.to_dict(),
                "prediction": self.prediction.to_dict(),
                "latency": self.latency.to_dict(),
            },
            use_bin_type=True,
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> WindowProfile:
        """Inverse of :meth:`to_bytes`.

        Raises
        ------
        ValueError
            If the bytes are not a profile of a known format version.
        """
        d = msgpack.unpackb(data, raw=False, strict_map_key=False)
        if not isinstance(d, dict) or d.get("fmt") != PROFILE_FORMAT_VERSION:
            raise ValueError(f"unknown profile format {d.get('fmt') if isinstance(d, dict) else d!r}")
        p = cls(d["model"], d["start"], d["len"])
        p.count = d["n"]
        p.versions = Counter(d["versions"])
        p.features = {k: FeatureProfile.from_dict(v) for k, v in d["features"].items()}
        p.score = NumericSketch.from_dict(d["score"])
        p.prediction = CategoricalSketch.from_dict(d["prediction"])
        p.latency = NumericSketch.from_dict(d["latency"])
        return p
