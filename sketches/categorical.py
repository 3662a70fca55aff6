"""Categorical feature sketch: exact counts while few categories, sketches beyond.

For the non-missing values of one feature in one window it keeps an exact
``category -> count`` table while the feature has at most
``MAX_EXACT_CATEGORIES`` distinct values. Beyond that it switches (transparently,
carrying the exact counts over) to three Apache DataSketches sketches:

* frequent items (Misra & Gries 1982; Anderson et al. 2017) tracking up to
  ``0.75 * 2**FI_LG_MAX_MAP_SIZE`` heavy hitters. Every tracked category was
  seen; its count c satisfies ``lower <= c <= lower + offset``, where the
  offset (:attr:`CategoricalSketch.frequency_error`) is at most
  ``3.5 / 2**FI_LG_MAX_MAP_SIZE * N`` and is 0, so every count exact, until
  the feature has more categories than the map holds. Any untracked category
  has a count <= offset.
* count-min (Cormode & Muthukrishnan 2005) with d = ``CMS_HASHES`` rows of
  w = ``CMS_BUCKETS`` counters: its estimate never undercounts, and exceeds the
  truth by more than eps N, eps = e / w, with probability at most e^-d. It
  tightens upper bounds; the lower bound comes from the frequent-items
  counter, which is certain, so :meth:`CategoricalSketch.count_interval`
  always contains the truth.
* CPC distinct count (Lang 2017, "Back to the future: an even more nearly
  optimal cardinality estimation algorithm") with ``2**DISTINCT_LG_K`` bins:
  relative standard error about 0.6 / sqrt(2**DISTINCT_LG_K) = 0.5 %, against
  1.04 / sqrt(k) for HyperLogLog at the same k, and ~1 KB for a feature with
  a thousand categories (HLL at lg k = 14: 4 KB). About 10 KB at high
  cardinality.

A category is reported present (in :meth:`CategoricalSketch.frequencies`) only
if it is exact-counted or tracked as a heavy hitter, so a category never seen is
never reported present. Its count there is :meth:`CategoricalSketch.estimate`,
which does not depend on the order in which values arrive.

Counts arriving in sketch mode are pre-aggregated in a pending table of at most
``PENDING_CATEGORIES`` categories and fed to the sketches in bulk: the three
sketches accept weighted updates with the same guarantees, and one update per
category instead of one per value is what makes small batches cheap.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence, Sized
from itertools import compress, repeat
from operator import add
from typing import Any

import datasketches
import numpy as np

from sketches.codec import shuffle8, unshuffle8

MAX_EXACT_CATEGORIES = 1024
"""Categories counted exactly before the sketches. At 1,024 (it was 256) a window of the ingest
benchmark (1,000-value Zipf features) closes 1.6x faster, since feeding the sketches costs three
DataSketches updates per category, and its profile is 25 % smaller (docs/profiles.md)."""
FI_LG_MAX_MAP_SIZE = 10
CMS_HASHES = 3
CMS_BUCKETS = 512
DISTINCT_LG_K = 14
PENDING_CATEGORIES = 1024

_ALL_TRACKED = datasketches.frequent_items_error_type.NO_FALSE_NEGATIVES

TYPE_TAG = "\x1f"
"""First character of the key of a value that is not a plain string (ASCII unit separator)."""


def category_key(value: str | bool | int) -> str:
    r"""The key a non-missing categorical value is counted under; it keeps the value's type.

    Strings are their own key (one starting with ``TYPE_TAG`` is escaped);
    booleans and integers get a tagged key, so ``True`` and ``"true"``, or
    ``123`` and ``"123"``, are different categories.

    Any other type (not produced by the record contract, which sends floats
    to the numeric part) is tagged with its type name.

    Examples
    --------
    >>> category_key("true"), category_key(True), category_key(123)
    ('true', '\x1fbool:true', '\x1fint:123')
    """
    if isinstance(value, str):
        return TYPE_TAG + "str:" + value if value.startswith(TYPE_TAG) else value
    if isinstance(value, bool):
        return TYPE_TAG + ("bool:true" if value else "bool:false")
    if isinstance(value, numbers.Integral):  # int, numpy integers
        return TYPE_TAG + "int:" + str(int(value))
    return TYPE_TAG + type(value).__name__ + ":" + str(value)  # never raises on odd input


BOOL_KEYS = {True: category_key(True), False: category_key(False)}


def legacy_label(key: str) -> str:
    """The label profiles written before typed keys used for the value of ``key``.

    They counted ``str(value)`` (booleans ``"true"`` / ``"false"``), so values
    of different types could share a label.

    Examples
    --------
    >>> legacy_label(category_key(True)), legacy_label(category_key(123)), legacy_label("x")
    ('true', '123', 'x')
    """
    return key.partition(":")[2] if key.startswith(TYPE_TAG) else key


def category_display(key: str) -> str:
    """How a key reads to a user: strings as they are, other types with their type.

    Examples
    --------
    >>> category_display("true"), category_display(category_key(True)), category_display("7")
    ('true', 'true (bool)', '7')
    """
    if not key.startswith(TYPE_TAG):
        return key
    kind, _, text = key[1:].partition(":")
    return text if kind == "str" else f"{text} ({kind})"


def _typed_forms(label: str) -> list[str]:
    """Every key whose :func:`legacy_label` is ``label``."""
    forms = [label]
    if label in ("true", "false"):
        forms.append(category_key(label == "true"))
    if label.lstrip("-").isdigit() and str(int(label)) == label:
        forms.append(category_key(int(label)))
    if label.startswith(TYPE_TAG):
        forms.append(category_key(label))
    return forms


def legacy_counts(counts: Mapping[str, int]) -> Counter[str]:
    """Counts re-keyed by :func:`legacy_label` (keys sharing a label add up)."""
    out: Counter[str] = Counter()
    for k, c in counts.items():
        out[legacy_label(k)] += c
    return out


def collision_mass(counters: np.ndarray) -> float:
    """Expected count-min overestimate of a category: E[min_r X_r], X_r a random counter of row r.

    Parameters
    ----------
    counters : np.ndarray, shape (d, w)
        The count-min counters, one row per hash function.

    Returns
    -------
    float
        E[min_r X_r] for independent X_r drawn from each row's counters,
        = v_0 + sum_k (v_(k+1) - v_k) prod_r P(X_r > v_k) over the sorted
        distinct counter values v_k. At most the smallest row mean N / w.

    Notes
    -----
    A category's count-min estimate is its count plus, in the row giving the
    minimum, the counts of the other categories hashed to its bucket; a
    bucket's content is distributed like a random counter of its row
    (Cormode & Muthukrishnan 2005), so subtracting the expectation of that
    minimum leaves a nearly unbiased estimate. It depends on the counters
    only, which are a linear function of the multiset of values, hence not
    on the order in which values or partial sketches arrive (the bias
    correction of Deng & Rafiei, "New estimation algorithms for streaming
    data: Count-min can do more", 2007, with the minimum's expectation in
    place of the row mean).

    Examples
    --------
    >>> collision_mass(np.array([[0.0, 2.0], [1.0, 1.0]]))  # min(X_1, 1): 0 or 1, even odds
    0.5
    """
    vals = np.unique(counters)
    rows = np.sort(counters, axis=1)
    w = rows.shape[1]
    above = [1.0 - np.searchsorted(r, vals[:-1], side="right") / w for r in rows]  # P(X_r > v_k)
    return float(vals[0] + np.sum(np.diff(vals) * np.prod(above, axis=0)))


class _Sketches:
    """The approximate state used once a feature has many categories."""

    __slots__ = ("fi", "cms", "cpc", "_collisions")

    def __init__(self) -> None:
        self.fi = datasketches.frequent_strings_sketch(FI_LG_MAX_MAP_SIZE)
        self.cms = datasketches.count_min_sketch(CMS_HASHES, CMS_BUCKETS)
        self.cpc = datasketches.cpc_sketch(DISTINCT_LG_K)
        self._collisions: float | None = None

    def update(self, counts: Mapping[str, int]) -> None:
        self._collisions = None
        fi, cms, cpc = self.fi.update, self.cms.update, self.cpc.update
        for v, c in counts.items():
            fi(v, c)
            cms(v, float(c))  # an int weight takes a slow overload path (8x slower)
            cpc(v)

    @property
    def collisions(self) -> float:
        """:func:`collision_mass` of the count-min counters (cached until the next change)."""
        if self._collisions is None:
            blob = self.cms.serialize()  # 16 bytes of preamble, the total weight, then the counters
            n = CMS_HASHES * CMS_BUCKETS
            if len(blob) < 8 * n:  # empty: the preamble only
                self._collisions = 0.0
            else:
                counters = np.frombuffer(blob[len(blob) - 8 * n:], "<f8")
                self._collisions = collision_mass(counters.reshape(CMS_HASHES, CMS_BUCKETS))
        return self._collisions

    def merge(self, other: _Sketches) -> None:
        self._collisions = None
        self.fi.merge(other.fi)
        self.cms.merge(other.cms)
        union = datasketches.cpc_union(DISTINCT_LG_K)
        union.update(self.cpc)
        union.update(other.cpc)
        self.cpc = union.get_result()

    def to_dict(self) -> dict[str, bytes]:
        # count-min counters are doubles: byte-shuffled they compress 4x (sketches.codec)
        return {"fi": self.fi.serialize(), "cms": shuffle8(self.cms.serialize()),
                "cpc": self.cpc.serialize()}

    @classmethod
    def from_dict(cls, d: dict[str, bytes]) -> _Sketches:
        s = cls.__new__(cls)
        s._collisions = None
        s.fi = datasketches.frequent_strings_sketch.deserialize(d["fi"])
        s.cms = datasketches.count_min_sketch.deserialize(unshuffle8(d["cms"]))
        s.cpc = datasketches.cpc_sketch.deserialize(d["cpc"])
        return s


class CategoricalSketch:
    """Mergeable summary of one categorical feature (see the module notes for the bounds).

    Notes
    -----
    In sketch mode, for a category with true count c among N values:
    ``lower <= c <= upper`` for ``(lower, upper) = count_interval(v)``, always;
    ``upper - lower <= frequency_error <= 3.5 / 2**FI_LG_MAX_MAP_SIZE * N``;
    the count-min estimate lies in ``[c, c + e / CMS_BUCKETS * N]`` with
    probability >= 1 - exp(-CMS_HASHES) (Cormode & Muthukrishnan, "An improved
    data stream summary: the count-min sketch and its applications", 2005);
    :meth:`estimate` subtracts the expected collision mass from it.

    Examples
    --------
    >>> s = CategoricalSketch()
    >>> s.update(["a", "b", "a"])
    >>> s.count, s.frequencies(), s.estimate("zzz"), s.distinct
    (3, {'a': 2, 'b': 1}, 0, 2.0)
    >>> s.update([f"v{i}" for i in range(1_100)])  # now sketched
    >>> s.is_exact, s.estimate("a"), s.count_interval("a"), s.estimate("zzz")
    (False, 2, (1, 2), 0)
    """

    __slots__ = ("count", "null_count", "exact", "typed", "_pending", "_sk")

    def __init__(self) -> None:
        # keys are category_key()s; False: a profile written before typed keys, whose keys are
        # legacy_label()s, read, merged and compared in those labels
        self.typed = True
        self.count = 0
        self.null_count = 0
        self.exact: Counter[str] | None = Counter()
        self._pending: Counter[str] = Counter()
        self._sk: _Sketches | None = None

    # -- building -------------------------------------------------------------
    def update(self, values: Iterable[str]) -> None:
        """Add keys: strings, or the :func:`category_key` of any other value."""
        if not isinstance(values, Sized):
            values = list(values)
        self.count += len(values)
        self._table().update(values)  # counted in C (collections._count_elements)
        self._check_size()

    def update_counts(self, counts: Mapping[str, int]) -> None:
        """Add pre-aggregated ``key -> count`` (keys as for :meth:`update`)."""
        self.count += sum(counts.values())
        self._table().update(counts)
        self._check_size()

    def count_strings(self, values: Sequence[str | None]) -> int:
        """Count a column of plain strings and None (no string starting with ``TYPE_TAG``:
        each string is its own key) straight into the table; returns the number of None.

        One C-level counting pass into the table (``Counter.update`` of a sequence), instead
        of a batch counter merged key by key.
        """
        table = self._table()
        table.update(values)
        nulls = table.pop(None, 0)
        self.count += len(values) - nulls
        self._check_size()
        return nulls

    def count_entries(self, entries: Sequence[str | None], counts: list[int]) -> int:
        """Count a dictionary-encoded column of plain strings and None (as for
        :meth:`count_strings`), given how many values each dictionary entry stands for:
        ``entries[k]`` seen ``counts[k]`` times (Python ints, same length; entries may
        repeat); returns the number of None.

        One C-level pass over the entries (``dict.update`` of ``(key, old + count)`` pairs,
        each read as it is written, so repeated entries add up) instead of one per value. New
        keys enter the table in the order of the entries; entries of count 0 are left out.

        Raises
        ------
        ValueError
            If ``entries`` and ``counts`` differ in length.
        """
        if len(entries) != len(counts):
            raise ValueError(f"{len(entries)} dictionary entries, {len(counts)} counts")
        if 0 in counts:  # entries no value uses
            entries, counts = list(compress(entries, counts)), [c for c in counts if c]
        table = self._table()
        dict.update(table, zip(entries, map(add, map(table.get, entries, repeat(0)), counts), strict=False))
        nulls = table.pop(None, 0)
        self.count += sum(counts) - nulls
        self._check_size()
        return nulls

    def _table(self) -> Counter[str]:
        """Where new counts go: the exact table, or the sketches' pending input."""
        return self._pending if self.exact is None else self.exact

    def _check_size(self) -> None:
        if self.exact is not None and len(self.exact) > MAX_EXACT_CATEGORIES:
            self._leave_exact()
        if len(self._pending) >= PENDING_CATEGORIES:
            self._flush()

    def _leave_exact(self) -> None:
        """Switch to sketch mode; the exact counts become pending sketch input."""
        self._sk, self._pending, self.exact = _Sketches(), self.exact, None

    def _flush(self) -> None:
        if self._pending:
            self._sk.update(self._pending)
            self._pending = Counter()

    def add_nulls(self, n: int) -> None:
        """Count ``n`` missing values."""
        self.null_count += n

    def merge(self, other: CategoricalSketch) -> None:
        """Merge ``other`` into this sketch (in place); ``other`` is not modified."""
        self.null_count += other.null_count
        self.count += other.count
        if self.typed and not other.typed:  # the result reads in the older labels
            self.typed = False
            if self.exact is not None:
                self.exact = legacy_counts(self.exact)
            self._pending = legacy_counts(self._pending)
        if other.exact is None:
            if self.exact is not None:
                self._leave_exact()
            self._sk.merge(other._sk)  # keys of both styles: read through their labels
        table = other._table()
        self._table().update(table if self.typed or not other.typed else legacy_counts(table))
        self._check_size()

    # -- reading --------------------------------------------------------------
    @property
    def is_exact(self) -> bool:
        """True while every count is exact."""
        return self.exact is not None

    def _sketches(self) -> _Sketches:
        self._flush()
        return self._sk

    def _forms(self, value: str, legacy: bool) -> list[str]:
        """The keys counted as ``value``: itself, or every key with that legacy label."""
        return _typed_forms(value) if legacy or not self.typed else [value]

    def count_interval(self, value: str, legacy: bool = False) -> tuple[int, int]:
        """Interval ``(lower, upper)`` that contains the true count of ``value``.

        Exact mode: ``(c, c)``. Sketch mode: lower = the frequent-items
        counter (0 when untracked), upper = min(lower + offset, count-min
        estimate). Both bounds hold with certainty. ``legacy`` (always, for
        a sketch that is not :attr:`typed`): ``value`` is a
        :func:`legacy_label` and the interval covers every key with it.
        """
        forms = self._forms(value, legacy)
        if len(forms) > 1:
            bounds = [self._count_interval(v) for v in forms]
            return sum(b[0] for b in bounds), sum(b[1] for b in bounds)
        return self._count_interval(value)

    def _count_interval(self, value: str) -> tuple[int, int]:
        if self.exact is not None:
            c = self.exact.get(value, 0)
            return c, c
        sk = self._sketches()
        lower = int(sk.fi.get_lower_bound(value))
        upper = min(int(sk.fi.get_upper_bound(value)), int(sk.cms.get_estimate(value)))
        return lower, max(upper, lower)

    @property
    def frequency_error(self) -> int:
        """Bound on the error of any count in :meth:`frequencies` (0 while exact)."""
        if self.exact is not None or not self.count:
            return 0
        fi = self._sketches().fi
        rows = fi.get_frequent_items(_ALL_TRACKED)
        return int(rows[0][3] - rows[0][2]) if rows else 0

    def frequencies(self, top: int | None = None, legacy: bool = False) -> dict[str, int]:
        """Most frequent categories -> count (:meth:`estimate`), most frequent first.

        Only categories that were seen are returned: in exact mode all of them,
        in sketch mode the tracked heavy hitters. ``legacy`` (always, for a
        sketch that is not :attr:`typed`): keyed by :func:`legacy_label`, the
        counts of keys sharing a label added up (to compare with a profile
        written before typed keys).
        """
        if self.exact is not None:
            counts = self.exact
        else:
            sk, exact_fi = self._sketches(), self.frequency_error == 0
            rows = sk.fi.get_frequent_items(_ALL_TRACKED)
            counts = {row[0]: self._estimate(sk, row[0], exact_fi) for row in rows}
            counts = {v: c for v, c in counts.items() if c > 0}
        if legacy or not self.typed:
            counts = legacy_counts(counts)
        rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return dict(rows if top is None else rows[:top])

    def estimate(self, value: str, legacy: bool = False) -> int:
        """Point estimate of one category's count, independent of the order of arrival.

        Exact in exact mode, and in sketch mode while the frequent-items map
        has never been full (:attr:`frequency_error` 0: its counters are the
        counts; a category not in it was never seen, estimate 0). Beyond,
        the count-min estimate less the expected mass of the categories
        colliding with it (:func:`collision_mass`), floored at 0: for true
        count c among N values it lies in [c - N / w, c + e N / w], the lower
        side always, the upper with probability >= 1 - exp(-d) (w =
        ``CMS_BUCKETS``, d = ``CMS_HASHES``), and is nearly unbiased.

        Notes
        -----
        The frequent-items counters depend on the order of arrival: a
        category of true count 10 among 200,000 distinct values read 270
        (the upper end of :meth:`count_interval`) when it came last and 0
        (untracked) when shuffled. The count-min counters do not. The
        certain bounds stay in :meth:`count_interval`.
        """
        forms = self._forms(value, legacy)
        if self.exact is not None:
            return sum(self.exact.get(v, 0) for v in forms)
        sk, exact_fi = self._sketches(), self.frequency_error == 0
        return sum(self._estimate(sk, v, exact_fi) for v in forms)

    @staticmethod
    def _estimate(sk: _Sketches, value: str, exact_fi: bool) -> int:
        if exact_fi:
            return int(sk.fi.get_lower_bound(value))
        return max(round(sk.cms.get_estimate(value) - sk.collisions), 0)

    @property
    def cms_error(self) -> float:
        """Count-min additive error bound ``eps * N``, eps = e / w (0 while exact)."""
        return 0.0 if self.exact is not None else math.e / CMS_BUCKETS * self.count

    @property
    def distinct(self) -> float:
        """Number of distinct categories: exact while exact, else the CPC estimate."""
        if self.exact is not None:
            return float(len(self.exact))
        return float(self._sketches().cpc.get_estimate())

    def distinct_error(self, sigmas: int = 3) -> float:
        """Half-width of the distinct count's ``sigmas``-sigma interval (1, 2 or 3): 0 while
        exact, else the larger side of CPC's own bounds (Lang 2017; datasketches
        ``get_lower_bound`` / ``get_upper_bound``).

        Examples
        --------
        >>> s = CategoricalSketch(); s.update([str(i) for i in range(5_000)])
        >>> 0 < s.distinct_error() / s.distinct < 0.02
        True
        """
        if self.exact is not None:
            return 0.0
        cpc = self._sketches().cpc
        est = cpc.get_estimate()
        return float(max(cpc.get_upper_bound(sigmas) - est, est - cpc.get_lower_bound(sigmas)))

    # -- serialisation ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (for MessagePack); see :meth:`from_dict`."""
        exact = None if self.exact is None else dict(self.exact)
        d: dict[str, Any] = {"n": self.count, "null": self.null_count, "exact": exact}
        if self.typed:
            d["typed"] = True  # absent: keys are legacy labels (profiles before typed keys)
        if self.exact is None:
            d.update(self._sketches().to_dict())
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CategoricalSketch:
        """Inverse of :meth:`to_dict`."""
        s = cls()
        s.count, s.null_count = d["n"], d["null"]
        s.typed = bool(d.get("typed", False))
        if d["exact"] is None:
            s.exact, s._sk = None, _Sketches.from_dict(d)
        else:
            s.exact = Counter(d["exact"])
        return s
