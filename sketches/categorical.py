"""Categorical feature sketch: exact counts while few categories, sketches beyond.

For the non-missing values of one feature in one window it keeps an exact
``category -> count`` table while the feature has at most
``MAX_EXACT_CATEGORIES`` distinct values. Beyond that it switches (transparently,
carrying the exact counts over) to:

* frequent items (Misra & Gries 1982; Apache DataSketches ``frequent_strings_sketch``)
  for the heavy hitters, each count within ``frequency_error`` of the truth;
* a count-min sketch (Cormode & Muthukrishnan, 2005) for point estimates of
  any category: ``true <= estimate <= true + eps * N`` with probability
  ``1 - exp(-CMS_HASHES)``, where ``eps = e / CMS_BUCKETS``;
* an HLL distinct count (Flajolet et al., 2007), relative standard error
  ``1.04 / sqrt(2**HLL_LG_K)``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

import datasketches

MAX_EXACT_CATEGORIES = 256
FI_LG_MAX_MAP_SIZE = 10
CMS_HASHES = 3
CMS_BUCKETS = 512
HLL_LG_K = 12

_NO_FALSE_POSITIVES = datasketches.frequent_items_error_type.NO_FALSE_POSITIVES


class _Sketches:
    """The approximate state used once a feature has many categories."""

    __slots__ = ("fi", "cms", "hll")

    def __init__(self) -> None:
        self.fi = datasketches.frequent_strings_sketch(FI_LG_MAX_MAP_SIZE)
        self.cms = datasketches.count_min_sketch(CMS_HASHES, CMS_BUCKETS)
        self.hll = datasketches.hll_sketch(HLL_LG_K)

    def update(self, counts: dict[str, int]) -> None:
        fi, cms, hll = self.fi, self.cms, self.hll
        for v, c in counts.items():
            fi.update(v, c)
            cms.update(v, c)
            hll.update(v)

    def merge(self, other: _Sketches) -> None:
        self.fi.merge(other.fi)
        self.cms.merge(other.cms)
        union = datasketches.hll_union(HLL_LG_K)
        union.update(self.hll)
        union.update(other.hll)
        self.hll = union.get_result(datasketches.tgt_hll_type.HLL_4)


class CategoricalSketch:
    """Mergeable summary of one categorical feature.

    Examples
    --------
    >>> s = CategoricalSketch()
    >>> s.update(["a", "b", "a"])
    >>> s.count, s.frequencies(), s.estimate("zzz"), s.distinct
    (3, {'a': 2, 'b': 1}, 0, 2.0)
    """

    __slots__ = ("count", "null_count", "exact", "_sk")

    def __init__(self) -> None:
        self.count = 0
        self.null_count = 0
        self.exact: dict[str, int] | None = {}
        self._sk: _Sketches | None = None

    def update(self, values: Iterable[str]) -> None:
        """Add string values (callers map bool to ``"true"``/``"false"``)."""
        self.update_counts(Counter(values))

    def update_counts(self, counts: dict[str, int]) -> None:
        """Add pre-aggregated ``category -> count``."""
        self.count += sum(counts.values())
        if self.exact is None:
            self._sk.update(counts)
            return
        ex = self.exact
        for v, c in counts.items():
            ex[v] = ex.get(v, 0) + c
        if len(ex) > MAX_EXACT_CATEGORIES:
            self._to_sketches()

    def _to_sketches(self) -> None:
        self._sk = _Sketches()
        self._sk.update(self.exact)
        self.exact = None

    def add_nulls(self, n: int) -> None:
        """Count ``n`` missing values."""
        self.null_count += n

    def merge(self, other: CategoricalSketch) -> None:
        """Merge ``other`` into this sketch (in place); ``other`` is not modified."""
        self.null_count += other.null_count
        if other.exact is not None:
            self.update_counts(other.exact)
            return
        self.count += other.count
        if self.exact is not None:
            self._to_sketches()
        self._sk.merge(other._sk)

    # -- reading --------------------------------------------------------------
    @property
    def is_exact(self) -> bool:
        """True while every count is exact."""
        return self.exact is not None

    def _rows(self) -> list[tuple[str, int, int, int]]:
        if self.exact is not None:
            return [(k, c, c, c) for k, c in self.exact.items()]
        return [tuple(r) for r in self._sk.fi.get_frequent_items(_NO_FALSE_POSITIVES)]

    @property
    def frequency_error(self) -> int:
        """Bound on the error of any count in :meth:`frequencies` (0 while exact)."""
        return max((int(hi - lo) for _i, _e, lo, hi in self._rows()), default=0)

    def frequencies(self, top: int | None = None) -> dict[str, int]:
        """Most frequent categories -> count, most frequent first.

        Only categories that were seen are returned (no false positives); in
        exact mode every category is returned with its exact count.
        """
        rows = sorted(self._rows(), key=lambda r: (-r[1], r[0]))
        if top is not None:
            rows = rows[:top]
        return {item: int(est) for item, est, _lo, _hi in rows}

    def estimate(self, value: str) -> int:
        """Point estimate of one category's count; 0 for a category never seen.

        Exact in exact mode. Otherwise the frequent-items count where it tracks
        the category, else the count-min estimate (``<= true + cms_error``).
        """
        if self.exact is not None:
            return self.exact.get(value, 0)
        est = int(self._sk.fi.get_estimate(value))
        return est if est else int(self._sk.cms.get_estimate(value))

    @property
    def cms_error(self) -> float:
        """Count-min additive error bound ``eps * N`` (0 while exact)."""
        return 0.0 if self.exact is not None else math.e / CMS_BUCKETS * self.count

    @property
    def distinct(self) -> float:
        """Number of distinct categories: exact while exact, else the HLL estimate."""
        if self.exact is not None:
            return float(len(self.exact))
        return float(self._sk.hll.get_estimate())

    # -- serialisation ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (for MessagePack); see :meth:`from_dict`."""
        d: dict[str, Any] = {"n": self.count, "null": self.null_count, "exact": self.exact}
        if self._sk is not None:
            d["fi"] = self._sk.fi.serialize()
            d["cms"] = self._sk.cms.serialize()
            d["hll"] = self._sk.hll.serialize_compact()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CategoricalSketch:
        """Inverse of :meth:`to_dict`."""
        s = cls()
        s.count, s.null_count, s.exact = d["n"], d["null"], d["exact"]
        if s.exact is None:
            s._sk = _Sketches()
            s._sk.fi = datasketches.frequent_strings_sketch.deserialize(d["fi"])
            s._sk.cms = datasketches.count_min_sketch.deserialize(d["cms"])
            s._sk.hll = datasketches.hll_sketch.deserialize(d["hll"])
        return s
