"""Prediction records of one model as columns: the form the wire carries (schema
version 2) and the aggregator profiles, without a Python object per record.

Validation is per column: a fast check on the set of value types (and string
lengths) covers the common all-valid case; only a column that fails it is
validated value by value, with the same rules as :func:`sdk.record.validate_record`,
to find the offending records.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from sdk.errors import BAD_ENVELOPE, WireError
from sdk.packed import DictionaryColumn, pack_column, take_column, unpack_column, unpack_feature, unwire
from sdk.record import (
    MAX_FEATURES,
    MAX_ID_LENGTH,
    MAX_SLICES,
    MAX_STRING_LENGTH,
    TOO_LARGE,
    PredictionRecord,
    RecordError,
    check_class_probabilities,
    check_event_time,
    check_feature_name,
    check_feature_value,
    check_identifier,
    check_number,
    check_predicted_label,
    check_slice_key,
    check_slice_value,
)
from sdk.vectors import check_vector_column, split_vectors, vector_values

_NONE = type(None)
_GET = {name: attrgetter(name) for name in (
    "features", "slices", "model_version", "prediction_id", "event_time", "score",
    "class_probabilities", "predicted_label", "latency_ms")}


def _transpose(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Dict rows -> columns; a key absent from a row is None there."""
    keys = tuple(rows[0])
    if all(tuple(r) == keys for r in rows):  # the usual case: one schema, one key order
        return {k: list(v) for k, v in zip(keys, zip(*[r.values() for r in rows], strict=True),
                                           strict=True)}
    return {k: [r.get(k) for r in rows] for k in sorted(set().union(*rows))}
_NUMBER_TYPES = {float, int}
PACKED_COLUMNS = frozenset({"model_version", "event_time", "score", "latency_ms"})
"""Columns besides the features that schema version 4 packs where they can be (doubles, or a
dictionary of strings: :mod:`sdk.packed`)."""
_FEATURE_TYPES = {float, int, str, bool, _NONE}


@dataclass(slots=True)
class RecordColumns:
    """Records of one model, column by column (index i is record i everywhere).

    Optional columns are None when every record lacks the field; inside a
    column a missing value is None. ``features`` and ``slices`` map a name to
    its column.
    """

    model_id: str
    model_version: list[str]
    prediction_id: list[str]
    event_time: list[float]
    features: dict[str, list[Any]] = field(default_factory=dict)
    score: list[float | None] | None = None
    class_probabilities: list[dict[str, float] | None] | None = None
    predicted_label: list[Any] | None = None
    slices: dict[str, list[str | None]] = field(default_factory=dict)
    latency_ms: list[float | None] | None = None
    vectors: dict[str, list[bytes | None]] = field(default_factory=dict)
    feature_types: dict[str, frozenset[type]] = field(default_factory=dict, repr=False, compare=False)
    """Per feature column, the set of its value types, where validation found it (a hint for
    the profile, which then skips its own type scan; a column absent here is scanned)."""
    distinct: dict[str, Collection] = field(default_factory=dict, repr=False, compare=False)
    """Per string feature column, its distinct values, where validation computed them (a hint:
    the profile checks these, not every value, for strings its category keys must escape)."""
    vector_drops: list[tuple[int, RecordError]] = field(default_factory=list, repr=False, compare=False)
    """Vectors validation dropped (record index in the message, why): their records are kept
    without them (:func:`validate_columns`)."""

    def __len__(self) -> int:
        return len(self.prediction_id)

    def take(self, keep: Sequence[int]) -> RecordColumns:
        """The records at the given indices, as columns (each in its own form:
        :func:`sdk.packed.take_column`)."""
        def pick(col):
            return take_column(col, keep)

        return RecordColumns(
            self.model_id, pick(self.model_version), pick(self.prediction_id), pick(self.event_time),
            {k: pick(v) for k, v in self.features.items()}, pick(self.score),
            pick(self.class_probabilities), pick(self.predicted_label),
            {k: pick(v) for k, v in self.slices.items()}, pick(self.latency_ms),
            {k: pick(v) for k, v in self.vectors.items()},
        )

    def split(self, k: int) -> tuple[RecordColumns, RecordColumns]:
        """The first ``k`` records and the others, as columns (slices of each column, with
        the type and distinct-value hints kept: a part's values are among the whole's).

        Examples
        --------
        >>> cols = RecordColumns("m", ["1"] * 3, ["a", "b", "c"], [0.0, 1.0, 2.0], {"x": [1, None, 3]})
        >>> head, tail = cols.split(2)
        >>> head.prediction_id, tail.features, len(tail)
        (['a', 'b'], {'x': [3]}, 1)
        """
        def cut(col):
            return (None, None) if col is None else (col[:k], col[k:])

        parts = [cut(c) for c in (self.model_version, self.prediction_id, self.event_time)]
        feats = {n: cut(c) for n, c in self.features.items()}
        opt = [cut(c) for c in (self.score, self.class_probabilities, self.predicted_label)]
        slices = {n: cut(c) for n, c in self.slices.items()}
        latency = cut(self.latency_ms)
        vectors = {n: cut(c) for n, c in self.vectors.items()}
        return tuple(  # type: ignore[return-value]
            RecordColumns(self.model_id, *(p[i] for p in parts), {n: c[i] for n, c in feats.items()},
                          *(o[i] for o in opt), {n: c[i] for n, c in slices.items()}, latency[i],
                          {n: c[i] for n, c in vectors.items()}, self.feature_types, self.distinct)
            for i in (0, 1))

    def records(self) -> list[PredictionRecord]:
        """One :class:`PredictionRecord` per row (missing features left out)."""
        out = []
        columns = {k: unwire(v) for k, v in self.features.items()}
        for i in range(len(self)):
            def at(col, i=i):
                return None if col is None else col[i]

            features = {k: v[i] for k, v in columns.items() if v[i] is not None}
            features.update((k, vector_values(v[i])) for k, v in self.vectors.items() if v[i] is not None)
            out.append(PredictionRecord(
                self.model_id, self.model_version[i], self.prediction_id[i], self.event_time[i],
                features,
                at(self.score), at(self.class_probabilities), at(self.predicted_label),
                {k: v[i] for k, v in self.slices.items() if v[i] is not None}, at(self.latency_ms),
            ))
        return out

    @classmethod
    def from_records(cls, model_id: str, records: Iterable[PredictionRecord]) -> RecordColumns:
        """Columns of valid records of one model (their ``model_id`` is not checked).

        Vector features move to ``vectors`` (as wire bytes; :func:`sdk.vectors.split_vectors`).
        Vectorised by column: the feature columns of the common single-schema
        batch are built in one ``zip``.

        Examples
        --------
        >>> c = RecordColumns.from_records("m", [
        ...     PredictionRecord("m", "1", "a", 0.0, {"x": 1.0}, score=0.5),
        ...     PredictionRecord("m", "1", "b", 0.0, {"y": "u"})])
        >>> c.features, c.score, len(c)
        ({'x': [1.0, None], 'y': [None, 'u']}, [0.5, None], 2)
        """
        records = list(records)
        if not records:
            return cls(model_id, [], [], [])
        col = {name: list(map(get, records)) for name, get in _GET.items()}
        features, slices = col.pop("features"), col.pop("slices")
        for name in ("score", "class_probabilities", "predicted_label", "latency_ms"):
            if all(v is None for v in col[name]):
                col[name] = None
        features = _transpose(features)
        vectors, _dropped = split_vectors(features)  # (valid records: nothing is dropped)
        return cls(model_id, features=features, slices=_transpose(slices) if any(slices) else {},
                   vectors=vectors, **col)

    def to_wire(self, *, packed: bool = False) -> dict[str, Any]:
        """The column map carried by a message: feature columns and the columns of
        :data:`PACKED_COLUMNS` packed where they can be (schema version 4,
        :func:`sdk.packed.pack_column`) or all arrays (version 2)."""
        out: dict[str, Any] = {
            "prediction_id": self.prediction_id, "slices": self.slices,
            "features": {k: pack_column(v, self.feature_types.get(k), self.distinct.get(k)) if packed
                         else unwire(v) for k, v in self.features.items()},
        }
        for name in ("model_version", "event_time", "score", "class_probabilities", "predicted_label",
                     "latency_ms"):
            col = getattr(self, name)
            if col is None:
                continue
            if name in PACKED_COLUMNS:
                col = pack_column(col) if packed else unwire(col)
            out[name] = col
        if self.vectors:
            out["vectors"] = self.vectors
        return out


# -- validation -----------------------------------------------------------------------
def _types(col: Iterable) -> set[type]:
    return set(map(type, col))


def _strings_fit(col: list, limit: int, allow_none: bool) -> bool:
    strs = [v for v in col if v is not None] if allow_none else col
    return not strs or max(map(len, strs)) <= limit


def _versions_ok(col: Sequence) -> bool:
    """A model-version column's values are valid identifiers (checked once per distinct value;
    a dictionary column's on its dictionary)."""
    return _ids_ok(set(col.values if isinstance(col, DictionaryColumn) else col))


def _ids_ok(col: Collection) -> bool:
    """Every value of ``col`` is a string of 1 to MAX_ID_LENGTH characters."""
    try:  # one C-level pass that fails on any value that is not a string
        joined = "".join(col)
    except TypeError:
        return False
    return "" not in col and (len(joined) <= MAX_ID_LENGTH or max(map(len, col)) <= MAX_ID_LENGTH)


def _times_ok(col: list | array) -> bool:
    if isinstance(col, array):  # doubles: finite when their sum is (else judged value by value)
        return math.isfinite(sum(col)) and min(col, default=0) >= 0
    return _types(col) <= _NUMBER_TYPES and all(map(math.isfinite, col)) and min(col, default=0) >= 0


def _numbers_ok(col: list | array) -> bool:
    if isinstance(col, array):
        return math.isfinite(sum(col))
    types = _types(col)
    if not types <= _NUMBER_TYPES | {_NONE}:
        return False
    return all(math.isfinite(v) for v in col if v is not None) if _NONE in types else all(
        map(math.isfinite, col))


def _str_lengths_ok(col: Collection, types: set[type]) -> bool:
    """The strings of ``col`` (whose value types are ``types``) fit MAX_STRING_LENGTH."""
    if str not in types:
        return True
    if len(types) == 1:  # all strings: no filtering pass
        return max(map(len, col)) <= MAX_STRING_LENGTH
    return _strings_fit([v for v in col if type(v) is str], MAX_STRING_LENGTH, False)


def _distinct(col: list, *, first_seen: bool = False) -> Collection:
    """The distinct values of a column that starts with a string (categorical columns
    repeat values), else the column itself.

    ``first_seen`` lists them in order of first occurrence (``dict.fromkeys``, about twice
    the cost of a set): a feature column's, which its packed dictionary takes
    (:func:`sdk.packed.pack_column`), so that the aggregator counts it per dictionary entry
    with its categories entering a profile in the order of its values
    (:func:`sketches.feature.count_dictionary`).

    Checking types and lengths on the distinct values is sound: values of
    different types that compare equal (True, 1, 1.0) are all valid or all
    invalid together, and no invalid hashable value (bytes, extension types)
    equals a valid one. Hashing also caches each string's hash for the
    profile's count that follows.
    """
    if col and type(col[0]) is str:
        try:
            return dict.fromkeys(col) if first_seen else set(col)
        except TypeError:  # unhashable values: checked one by one
            pass
    return col


def _feature_types(distinct: Collection) -> frozenset[type] | None:
    """The value types of a valid feature column given its :func:`_distinct` values (all of
    them allowed, strings not too long), else None."""
    types = frozenset(map(type, distinct))
    return types if types <= _FEATURE_TYPES and _str_lengths_ok(distinct, types) else None


def _labels_ok(col: list) -> bool:
    types = _types(col)
    return types <= {str, int, bool, _NONE} and _str_lengths_ok(col, types)


def _slices_ok(col: list) -> bool:
    col = _distinct(col)
    types = _types(col)
    return types <= {str, _NONE} and _str_lengths_ok(col, types)


def _scan(col: list, fast: Callable[[list], bool], check: Callable[[Any], Any],
          bad: dict[int, RecordError]) -> None:
    """Record the first error of each bad value in ``bad`` (index -> error)."""
    try:
        if fast(col):
            return
    except (OverflowError, TypeError):  # math.isfinite of an integer beyond float range, a set
        pass  # of unhashable values (a list or map from the wire): judged value by value
    for i, v in enumerate(col):
        if i not in bad:
            try:
                check(v)
            except RecordError as exc:
                bad[i] = exc


def _column(raw: dict, name: str, n: int, required: bool, packed: bool = False
            ) -> list | array | DictionaryColumn | None:
    """Column ``name`` of ``n`` values; with ``packed``, one of :data:`PACKED_COLUMNS` may also
    be a packed form (:func:`sdk.packed.unpack_column`)."""
    col = raw.get(name)
    if col is None and not required:
        return None
    if packed and isinstance(col, dict) and name in PACKED_COLUMNS:
        return unpack_column(col, name, n)
    if not isinstance(col, list) or len(col) != n:
        raise WireError(BAD_ENVELOPE, f"column {name} must be a list of {n} values")
    return col


def _named_columns(raw: dict, name: str, n: int, limit: int, packed: bool = False) -> dict[str, list]:
    """The named columns of group ``name``; with ``packed``, a column may also be a map
    (a packed column, checked by :func:`sdk.packed.unpack_feature`)."""
    cols = raw.get(name) or {}
    if not isinstance(cols, dict):
        raise WireError(BAD_ENVELOPE, f"column group {name} must be a map")
    if len(cols) > limit:
        raise RecordError(name, f"more than {limit} {name}", TOO_LARGE)
    for k, col in cols.items():
        if not (packed and isinstance(col, dict)):
            _column(cols, k, n, True)
    return cols


def validate_columns(model_id: str, raw: dict, *, packed: bool = False, packed_columns: bool = False
                     ) -> tuple[RecordColumns, list[tuple[int, RecordError]]]:
    """Validate a column map of schema version 2, 3 (``packed``: feature columns may be
    packed, :mod:`sdk.packed`; they decode as arrays of doubles and
    :class:`~sdk.packed.DictionaryColumn`) or 4 (``packed_columns`` too: so may the columns
    of :data:`PACKED_COLUMNS`).

    The per-column fast paths do not bound integers (a pass over every integer
    column would cost about as much as the type check): the wire bounds them.
    MessagePack cannot carry an integer beyond 64 bits, so a decoded column
    never holds one, and the SDK's encoder refuses it (:func:`sdk.batching.split_messages`
    leaves out its record alone). A column judged value by value refuses it
    (:func:`sdk.record.check_integer`).

    A bad vector (:mod:`sdk.vectors`) drops that record's vector only: it is listed in
    the columns' ``vector_drops``, not in ``errors``.

    Returns
    -------
    columns : RecordColumns
        The valid records.
    errors : list[tuple[int, RecordError]]
        ``(index, first error)`` of each invalid record, by index.

    Raises
    ------
    sdk.errors.WireError
        If the columns do not form a table (missing, of unequal length).
    """
    pid = raw.get("prediction_id")
    if not isinstance(pid, list):
        raise WireError(BAD_ENVELOPE, "column prediction_id must be a list")
    n = len(pid)
    bad: dict[int, RecordError] = {}
    try:
        features = _named_columns(raw, "features", n, MAX_FEATURES, packed)
        slices = _named_columns(raw, "slices", n, MAX_SLICES)
        vectors = _named_columns(raw, "vectors", n, MAX_FEATURES - len(features))
    except RecordError as exc:  # too many columns: every record is too wide
        return RecordColumns(model_id, [], [], []), [(i, exc) for i in range(n)]
    cols = RecordColumns(
        model_id, _column(raw, "model_version", n, True, packed_columns), pid,
        _column(raw, "event_time", n, True, packed_columns), features,
        _column(raw, "score", n, False, packed_columns), _column(raw, "class_probabilities", n, False),
        _column(raw, "predicted_label", n, False), slices,
        _column(raw, "latency_ms", n, False, packed_columns),
    )
    for name, col in list(vectors.items()):
        try:
            check_feature_name(name)
        except RecordError as exc:
            return RecordColumns(model_id, [], [], []), [(i, exc) for i in range(n)]
        if name in features:
            exc = RecordError(f"features.{name}", "a feature is either a vector or a scalar")
            cols.vector_drops += [(i, exc) for i, v in enumerate(col) if v is not None]
            continue
        cols.vectors[name], dropped = check_vector_column(col, name)
        cols.vector_drops += dropped
    _scan(cols.model_version, _versions_ok, lambda v: check_identifier(v, "model_version"), bad)
    _scan(cols.prediction_id, _ids_ok, lambda v: check_identifier(v, "prediction_id"), bad)
    _scan(cols.event_time, _times_ok, check_event_time, bad)
    for name in ("score", "latency_ms"):
        col = getattr(cols, name)
        if col is not None:
            _scan(col, _numbers_ok, lambda v, name=name: check_number(v, name), bad)
    if cols.predicted_label is not None:
        _scan(cols.predicted_label, _labels_ok, check_predicted_label, bad)
    if cols.class_probabilities is not None:
        _scan(cols.class_probabilities, lambda _c: False, check_class_probabilities, bad)
    for name, col in features.items():
        try:
            check_feature_name(name)
        except RecordError as exc:
            return RecordColumns(model_id, [], [], []), [(i, exc) for i in range(n)]
        if isinstance(col, dict):
            features[name], cols.feature_types[name], values = unpack_feature(col, name, n, bad)
            if values is not None:
                cols.distinct[name] = values
            continue
        distinct = _distinct(col, first_seen=True)
        types = _feature_types(distinct)
        if types is None:
            _scan(col, lambda _c: False, lambda v, name=name: check_feature_value(v, name), bad)
            continue
        cols.feature_types[name] = types
        if distinct is not col:
            cols.distinct[name] = distinct
    for key, col in list(slices.items()):
        try:
            check_slice_key(key)
        except RecordError as exc:  # the records holding a value under it are invalid
            for i, v in enumerate(col):
                if v is not None:
                    bad.setdefault(i, exc)
            del slices[key]
            continue
        _scan(col, _slices_ok, lambda v, key=key: v is None or check_slice_value(v, key), bad)
    errors = sorted(bad.items())
    if errors:  # (the subset's columns carry no type hints)
        drops = [(i, e) for i, e in cols.vector_drops if i not in bad]
        cols = cols.take([i for i in range(n) if i not in bad])
        cols.vector_drops = drops
    return cols, errors
