"""One feature in one window: missing values plus a numeric and a categorical sketch."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from sdk.packed import DictionaryColumn
from sketches.categorical import BOOL_KEYS, TYPE_TAG, CategoricalSketch, category_key
from sketches.numeric import NumericSketch

Kind = Literal["numeric", "categorical", "empty"]
Column = np.ndarray | Sequence[Any]
"""Raw values of one feature for a batch of records: a numpy array or a sequence."""

_NONE = type(None)
_NUMBER_TYPES = {float, int}
_STR_OR_NONE = {str, _NONE}


def escape_strings(counts: dict[str, int]) -> dict[str, int]:
    """String counts keyed by :func:`~sketches.categorical.category_key` (a string is its own
    key unless it starts with ``TYPE_TAG``; such strings, if any, are re-keyed), in place."""
    if TYPE_TAG not in "".join(counts):  # the common case: one C-level scan, no per-key work
        return counts
    odd = [k for k in counts if k.startswith(TYPE_TAG)]
    for k in odd:
        n, key = counts.pop(k), category_key(k)
        counts[key] = counts.get(key, 0) + n
    return counts


def count_dictionary(sketch: CategoricalSketch, col: DictionaryColumn) -> int:
    """Count a dictionary column of plain strings and None (its codes validated: each
    indexes the dictionary) into ``sketch``; returns the number of None.

    Per dictionary entry (:meth:`~sketches.categorical.CategoricalSketch.count_entries`,
    each entry's count a ``np.bincount`` of the codes) when the dictionary lists the
    column's values in order of first occurrence (the codes' running maximum starts at 0
    and grows by at most 1: as the SDK encodes a whole column) and the column holds at least
    twice as many values as entries, plus 64 (a pass over an entry costs about what a pass
    over two values does, the bincount what 64 values do: measured with 50 to 1,000
    entries). New categories then enter the table in the order of the values, as they do
    per value, so the profile is the same, bytes and sketch-mode answers alike. Otherwise
    per value: a dictionary in another order (another producer's; the rows of a message
    taken for one window, version or slice) or mostly unused.
    """
    if len(col) < 2 * len(col.values) + 64:
        return sketch.count_strings(col)
    codes = np.frombuffer(col.codes, dtype=f"u{col.codes.itemsize}")
    # the running maximum never decreases: it goes from 0 to seen[-1] in steps of 1 exactly
    # when it starts at 0 and changes seen[-1] times
    seen = np.maximum.accumulate(codes)
    if seen[0] or np.count_nonzero(seen[1:] != seen[:-1]) != seen[-1]:
        return sketch.count_strings(col)
    return sketch.count_entries(col.values, np.bincount(codes, minlength=len(col.values)).tolist())


def _without_none(values: Sequence[Any], nulls: int) -> Sequence[Any]:
    return [v for v in values if v is not None] if nulls else values


@dataclass(frozen=True)
class QualityCounts:
    """A feature's values in a window (or part of one) as the data-quality rate tests count
    them: all values (missing included), the missing ones (None, absent, NaN) and the
    non-finite ones (NaN, +/-inf). Counts add, so the values between two moments of a
    window are the difference of its counts (:meth:`minus`).

    Examples
    --------
    >>> f = FeatureProfile(); f.update([1.0, None, float("nan"), float("inf")])
    >>> c = f.quality_counts(); c
    QualityCounts(total=4, nulls=2, nonfinite=2)
    >>> f.update([None]); f.quality_counts().minus(c)
    QualityCounts(total=1, nulls=1, nonfinite=0)
    """

    total: int
    nulls: int
    nonfinite: int

    def minus(self, earlier: QualityCounts) -> QualityCounts:
        """The values counted since ``earlier`` (counts of the same feature and window)."""
        return QualityCounts(self.total - earlier.total, self.nulls - earlier.nulls,
                             self.nonfinite - earlier.nonfinite)


class FeatureProfile:
    r"""One feature in one window: missing values plus numeric and categorical parts.

    Numbers (int, float) go to :attr:`numeric`; strings and booleans to
    :attr:`categorical`, each under a key that keeps its type
    (:func:`~sketches.categorical.category_key`: ``True`` and ``"true"`` are
    two categories). A feature's :attr:`kind` is the part holding most
    values; values of the other part count as type mismatches. ``None``, an
    absent key and NaN are missing values; ``+/-inf`` are counted apart.

    Examples
    --------
    >>> f = FeatureProfile()
    >>> f.update([1.0, 2, None, float("nan"), "x", True])
    >>> f.null_count, f.numeric.count, f.categorical.frequencies(), f.kind, f.type_mismatch_count
    (2, 2, {'\x1fbool:true': 1, 'x': 1}, 'numeric', 2)
    >>> f.update(np.array([3.0, np.inf]))
    >>> f.numeric.count, f.inf_count
    (3, 1)
    """

    __slots__ = ("missing", "numeric", "categorical")

    def __init__(self) -> None:
        self.missing = 0
        self.numeric = NumericSketch()
        self.categorical = CategoricalSketch()

    def update(self, values: Column, types: frozenset[type] | None = None,
               distinct: Collection[Any] | None = None) -> None:
        """Add the values of one column.

        Parameters
        ----------
        values : numpy.ndarray or sequence
            A float or integer array (NaN missing), a bool array, a string or
            object array, an :class:`array.array` of doubles or a
            :class:`~sdk.packed.DictionaryColumn` (counted by its dictionary), or a
            sequence of numbers, strings, bools and None.
            Homogeneous columns take a vectorised path; mixed ones are split
            value by value.
        types : frozenset of type, optional
            The types of the values of a sequence, when the caller knows them
            (:attr:`sdk.columns.RecordColumns.feature_types`): a column of
            numbers only then skips the type scan.
        distinct : collection, optional
            The distinct values of a sequence, when the caller knows them
            (:attr:`sdk.columns.RecordColumns.distinct`): a column of strings then
            checks these for strings its keys must escape, not every value.
        """
        if isinstance(values, array):  # packed doubles (sdk.packed)
            values = np.frombuffer(values, dtype=np.float64)
        if isinstance(values, np.ndarray):
            kind = values.dtype.kind
            if kind in "fiu":
                self.numeric.update(values)
                return
            if kind == "b":
                n_true = int(np.count_nonzero(values))
                self.categorical.update_counts({BOOL_KEYS[True]: n_true,
                                                BOOL_KEYS[False]: values.size - n_true})
                return
            values = values.tolist()
        elif isinstance(values, DictionaryColumn):  # validated: strings and None
            strings = map(str, filter(None, values.values)) if distinct is None else filter(None, distinct)
            if TYPE_TAG in "".join(strings):
                counts = Counter(values)
                self.missing += counts.pop(None, 0)
                self.categorical.update_counts(escape_strings(counts))
            else:  # each string its own key: counted in C-level passes
                self.missing += count_dictionary(self.categorical, values)
            return
        n = len(values)
        if not n:
            return
        first = type(values[0])
        if first is str and self._update_strings(values, types, distinct):
            return
        if first is float or first is int:
            kinds = set(map(type, values)) if types is None else types
            if kinds <= _NUMBER_TYPES:  # no None, str or bool: one vectorised update
                self.numeric.update(np.array(values, dtype=np.float64))
                return
        types = list(map(type, values))
        nulls = types.count(_NONE)
        if type(values[0]) is str and types.count(str) + nulls == n:
            self.categorical.update_counts(escape_strings(Counter(_without_none(values, nulls))))
        elif types.count(float) + types.count(int) + nulls == n:
            self.numeric.update(np.array(_without_none(values, nulls), dtype=np.float64))
        else:
            self._update_mixed(values)
            return
        self.missing += nulls

    def _update_strings(self, values: Sequence[Any], types: frozenset[type] | None = None,
                        distinct: Collection[Any] | None = None) -> bool:
        """Count a column of strings and None in one pass; False (nothing added) if it
        holds any other type.

        Counting first and checking the types of the distinct values only is sound:
        no value of another type compares equal to a string or to None, so every
        value's type is the type of some counted key. When the caller knows the
        column holds only strings and None (``types``) and no string starts with
        ``TYPE_TAG`` (so each string is its own key; checked on ``distinct`` when given),
        the values are counted straight into the sketch's table.
        """
        if types is not None and types <= _STR_OR_NONE and TYPE_TAG not in "".join(
                filter(None, values if distinct is None else distinct)):
            self.missing += self.categorical.count_strings(values)
            return True
        try:
            counts = Counter(values)
        except TypeError:  # an unhashable value: not a string column
            return False
        if not set(map(type, counts)) <= _STR_OR_NONE:
            return False
        self.missing += counts.pop(None, 0)
        if counts:
            self.categorical.update_counts(escape_strings(counts))
        return True

    def _update_mixed(self, values: Sequence[Any]) -> None:
        nums: list[float] = []
        cats: list[str] = []
        for v in values:
            t = type(v)
            if t is float or t is int:
                nums.append(v)
            elif t is str:
                cats.append(category_key(v))
            elif v is None:
                self.missing += 1
            elif t is bool:
                cats.append(BOOL_KEYS[v])
            else:  # int / float subclasses such as numpy scalars
                nums.append(float(v))
        if nums:
            self.numeric.update(np.array(nums, dtype=np.float64))
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
        """Numeric values, infinities included."""
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

    def quality_counts(self) -> QualityCounts:
        """What the null-rate and non-finite tests count (:class:`QualityCounts`)."""
        return QualityCounts(self.total, self.null_count, self.numeric.null_count + self.inf_count)

    def to_dict(self, *, compress: bool = True) -> dict[str, Any]:
        """Plain-data form (for MessagePack); see :meth:`from_dict` and, for ``compress``,
        :meth:`NumericSketch.to_dict <sketches.numeric.NumericSketch.to_dict>`."""
        d: dict[str, Any] = {"miss": self.missing}
        if self.numeric.count or self.numeric.null_count or self.inf_count:
            d["num"] = self.numeric.to_dict(compress=compress)
        if self.categorical.count:
            d["cat"] = self.categorical.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FeatureProfile:
        """Inverse of :meth:`to_dict`."""
        f = cls()
        f.missing = d["miss"]
        if "num" in d:
            f.numeric = NumericSketch.from_dict(d["num"])
        if "cat" in d:
            f.categorical = CategoricalSketch.from_dict(d["cat"])
        return f
