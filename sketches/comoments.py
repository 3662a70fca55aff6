"""Mergeable co-moments of a model's numeric features: complete rows, mean vector, scatter matrix.

One block per window profile (and per reference profile) summarises how the
model's numeric features move *together*: the number of complete rows ``n``,
their mean vector ``mean`` (shape ``(d,)``) and their co-moment (scatter)
matrix ``m2 = sum_i (x_i - mean)(x_i - mean)^T`` (shape ``(d, d)``), plus each
feature's third and fourth central power sums ``m3``, ``m4`` (shape ``(d,)``: its
skewness and kurtosis). From them the detectors read covariances, correlations
and kurtoses exactly
(:mod:`detectors.multivariate`), with no raw rows.

Which features
--------------
The block's features are fixed when it first sees a batch: the numeric columns
of that batch (float/int arrays, or sequences of numbers and None), in name
order, at most :data:`MAX_FEATURES` of them (the first by name). A feature first
seen later, or one that was not numeric in that first batch, is not in the
block of that window.

Which rows
----------
Complete-case: a row enters the block only when every one of the block's
features holds a finite number in it; a row with a null, NaN, +/-inf or a
non-number in any of them, or a magnitude above :data:`MAX_ABS` (whose products
would overflow), is counted in ``excluded`` and left out, so ``mean``
and ``m2`` always describe one set of rows (a covariance matrix from pairwise
deletion need not be positive semi-definite). A broken feature that is
mostly null therefore empties the block; its data-quality checks say so.

Merging
-------
Exact, by the parallel update of Chan, Golub & LeVeque ("Updating formulae and
a pairwise algorithm for computing sample variances", 1979), applied to vectors:

    n = n_a + n_b,  delta = mean_b - mean_a,
    mean = mean_a + delta * n_b / n,
    m2 = m2_a + m2_b + outer(delta, delta) * n_a * n_b / n,

and per feature (elementwise, s_a, s_b the diagonals of m2_a, m2_b) the
higher power sums of Pébay ("Formulas for robust, one-pass parallel computation
of covariances and arbitrary-order statistical moments", Sandia 2008):

    m3 = m3_a + m3_b + delta^3 n_a n_b (n_a - n_b) / n^2 + 3 delta (n_a s_b - n_b s_a) / n,
    m4 = m4_a + m4_b + delta^4 n_a n_b (n_a^2 - n_a n_b + n_b^2) / n^3
         + 6 delta^2 (n_a^2 s_b + n_b^2 s_a) / n^2 + 4 delta (n_a m3_b - n_b m3_a) / n.

Within a batch the block takes one matrix product (``X_c X_c^T`` of the
centred complete rows, a row per feature), so building costs O(n d^2) floating-point work in
numpy and no Python loop over rows. Two blocks over different feature sets
merge on the features they share (each side's rows are those complete on its
own features; the sub-blocks of a block are exact for those rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sketches.codec import pack_floats, unpack_floats

MAX_FEATURES = 64
"""Numeric features per block (the first by name order): 64 features keep the matrix at
2,080 doubles (16.6 KB before compression) per window."""


_INT_FLOAT = frozenset({int, float})
MAX_ABS = 1e75
"""Largest magnitude a value of a complete row may have: fourth powers stay below 1e300, so
sums over up to 1e8 rows stay finite in float64."""


def _is_number_type(t: type) -> bool:
    return issubclass(t, (float, int, np.floating, np.integer)) and not issubclass(t, (bool, np.bool_))


def numeric_matrix(columns: Mapping[str, Any], names: Sequence[str], n: int,
                   types: Mapping[str, frozenset[type]] | None = None) -> np.ndarray:
    """The ``(len(names), n)`` float64 matrix of ``columns[names]`` (a row per feature, so
    that reductions over the rows of a batch run along contiguous memory); NaN where a
    value is missing, absent or not a number (a bool is not a number).

    ``types``: per column, the set of its value types when known (skips the scan).

    Examples
    --------
    >>> numeric_matrix({"a": [1.0, None], "b": np.array([2, 3]), "c": [True, 2]}, "abcd", 2).tolist()
    [[1.0, nan], [2.0, 3.0], [nan, 2.0], [nan, nan]]
    """
    types = types or {}
    x = np.full((len(names), n), np.nan)
    for j, name in enumerate(names):
        col = columns.get(name)
        if col is None:
            continue
        if isinstance(col, np.ndarray):
            if col.dtype.kind in "fiu":
                x[j] = col
            continue
        kinds = types.get(name) or frozenset(map(type, col))
        if all(t is type(None) or _is_number_type(t) for t in kinds):
            x[j] = np.array(col, dtype=np.float64)  # None -> NaN
        else:  # strings, bools or other values among the numbers: those rows are excluded
            x[j] = [v if _is_number_type(type(v)) else np.nan for v in col]
    return x


def numeric_names(columns: Mapping[str, Any], types: Mapping[str, frozenset[type]],
                  limit: int = MAX_FEATURES) -> tuple[str, ...]:
    """The columns that are numeric, in name order, at most ``limit`` of them.

    A numpy column is numeric when its dtype is float, int or unsigned; a sequence when
    its values (``types`` when known, else a scan) are numbers (numpy scalars too) and
    None, with at least one number (bools are categories, never numbers).

    Examples
    --------
    >>> numeric_names({"b": [1.0, None], "a": np.array([1, 2]), "c": ["x", 1.0], "d": [None]}, {})
    ('a', 'b')
    """
    out = []
    for name in sorted(columns):
        col = columns[name]
        if isinstance(col, np.ndarray):
            ok = col.dtype.kind in "fiu"
        else:
            kinds = types.get(name) or frozenset(map(type, col))
            numbers = [t for t in kinds if t is not type(None)]
            ok = bool(numbers) and all(map(_is_number_type, numbers))
        if ok:
            out.append(name)
            if len(out) == limit:
                break
    return tuple(out)


def number_arrays(columns: Mapping[str, Any], types: Mapping[str, frozenset[type]]) -> dict[str, Any]:
    """``columns`` with each sequence known (``types``) to hold only floats and ints as a
    float64 array, so the feature's sketch and the co-moments convert it once.

    Examples
    --------
    >>> out = number_arrays({"a": [1, 2.5], "b": [1.0, None]}, {"a": frozenset({int, float})})
    >>> out["a"].tolist(), out["b"]
    ([1.0, 2.5], [1.0, None])
    """
    out = dict(columns)
    for name, col in columns.items():
        kinds = types.get(name)
        if kinds and not isinstance(col, np.ndarray) and kinds <= _INT_FLOAT:
            out[name] = np.array(col, dtype=np.float64)
    return out


class CoMoments:
    r"""Count, mean vector and scatter matrix of the complete rows of some numeric features.

    Parameters
    ----------
    names : Sequence[str]
        The features, in order (empty: fixed by the first :meth:`update`).
    max_features : int
        Cap on the features chosen by the first :meth:`update`.

    Attributes
    ----------
    names : tuple of str
    n : int
        Complete rows.
    excluded : int
        Rows left out for a missing or non-finite value in any of ``names``.
    mean : numpy.ndarray, shape (d,)
    m2 : numpy.ndarray, shape (d, d)
        Scatter matrix ``sum_i (x_i - mean)(x_i - mean)^T`` (symmetric).
    m3, m4 : numpy.ndarray, shape (d,)
        Per feature ``sum_i (x_i - mean)^3`` and ``sum_i (x_i - mean)^4``.

    Notes
    -----
    Covariance (unbiased): ``m2 / (n - 1)``; correlation
    ``m2_ij / sqrt(m2_ii m2_jj)``. Merge rule: module docstring (Chan et al. 1979).

    Examples
    --------
    >>> c = CoMoments()
    >>> c.update({"x": [1.0, 2.0, 3.0, None], "y": np.array([2.0, 4.0, 6.0, 1.0])}, {}, 4)
    >>> c.names, c.n, c.excluded, c.mean.tolist()
    (('x', 'y'), 3, 1, [2.0, 4.0])
    >>> c.covariance().tolist()
    [[1.0, 2.0], [2.0, 4.0]]
    >>> round(float(c.correlation()[0, 1]), 12)
    1.0
    """

    __slots__ = ("names", "n", "excluded", "mean", "m2", "m3", "m4", "max_features")

    def __init__(self, names: Sequence[str] = (), *, max_features: int = MAX_FEATURES) -> None:
        if max_features < 1:
            raise ValueError("max_features must be >= 1")
        self.names = tuple(names)
        self.max_features = max_features
        self.n = 0
        self.excluded = 0
        d = len(self.names)
        self.mean = np.zeros(d)
        self.m2 = np.zeros((d, d))
        self.m3, self.m4 = np.zeros(d), np.zeros(d)

    @property
    def dim(self) -> int:
        """Number of features d."""
        return len(self.names)

    def update(self, columns: Mapping[str, Any], types: Mapping[str, frozenset[type]],
               n: int) -> None:
        """Add a batch of ``n`` rows given as columns (name -> array or sequence).

        The first batch with a numeric column fixes :attr:`names`
        (:func:`numeric_names`; rows of earlier batches count as excluded); a feature
        of the block absent from ``columns`` is missing in every row of the batch.
        """
        if not n:
            return
        if not self.names:  # rows excluded before stay excluded
            names = numeric_names(columns, types, self.max_features)
            if not names:
                self.excluded += n
                return
            self.names = names
            d = len(names)
            self.mean, self.m2, self.m3, self.m4 = np.zeros(d), np.zeros((d, d)), np.zeros(d), np.zeros(d)
        x = numeric_matrix(columns, self.names, n, types)
        complete = (np.abs(x) <= MAX_ABS).all(axis=0)  # NaN compares False
        rows = int(np.count_nonzero(complete))
        if rows < n:
            x = x[:, complete]
        self.excluded += n - rows
        if rows:
            mean = x.mean(axis=1)
            dx = x - mean[:, None]
            dx2 = dx * dx
            self._combine(rows, mean, dx @ dx.T, (dx2 * dx).sum(axis=1), (dx2 * dx2).sum(axis=1))

    def _combine(self, n_b: int, mean_b: np.ndarray, m2_b: np.ndarray, m3_b: np.ndarray,
                 m4_b: np.ndarray) -> None:
        n_a = self.n
        n = n_a + n_b
        delta = mean_b - self.mean
        s_a, s_b = np.diag(self.m2), np.diag(m2_b)
        d2 = delta * delta
        self.m4 = (self.m4 + m4_b + d2 * d2 * (n_a * n_b * (n_a * n_a - n_a * n_b + n_b * n_b) / n**3)
                   + 6.0 * d2 * (n_a * n_a * s_b + n_b * n_b * s_a) / n**2
                   + 4.0 * delta * (n_a * m3_b - n_b * self.m3) / n)
        self.m3 = (self.m3 + m3_b + d2 * delta * (n_a * n_b * (n_a - n_b) / n**2)
                   + 3.0 * delta * (n_a * s_b - n_b * s_a) / n)
        self.mean = self.mean + delta * (n_b / n)
        self.m2 = self.m2 + m2_b + np.outer(delta, delta) * (n_a * n_b / n)
        self.n = n

    def subset(self, names: Sequence[str]) -> CoMoments:
        """The block restricted to ``names`` (each one of :attr:`names`): exact for its rows.

        Raises
        ------
        KeyError
            If a name is not in the block.
        """
        idx = [self.names.index(k) if k in self.names else _missing(k) for k in names]
        out = CoMoments(names, max_features=self.max_features)
        out.n, out.excluded = self.n, self.excluded
        out.mean, out.m2 = self.mean[idx].copy(), self.m2[np.ix_(idx, idx)].copy()
        out.m3, out.m4 = self.m3[idx].copy(), self.m4[idx].copy()
        return out

    def merge(self, other: CoMoments) -> CoMoments:
        """Merge ``other`` into this block (in place) and return ``self``; ``other`` is not
        modified. Blocks over different features keep the features both hold, in this
        block's order (module docstring)."""
        if not other.names:
            self.excluded += other.excluded + other.n
            return self
        if not self.names:  # no complete row yet
            excluded = self.excluded
            self._assign(other)
            self.excluded += excluded
            return self
        if other.names != self.names:
            shared = [k for k in self.names if k in other.names]
            mine = self.subset(shared)
            self._assign(mine)
            other = other.subset(shared)
        self.excluded += other.excluded
        if other.n:
            self._combine(other.n, other.mean, other.m2, other.m3, other.m4)
        return self

    def _assign(self, other: CoMoments) -> None:
        self.names, self.n, self.excluded = other.names, other.n, other.excluded
        self.mean, self.m2 = other.mean.copy(), other.m2.copy()
        self.m3, self.m4 = other.m3.copy(), other.m4.copy()

    def covariance(self) -> np.ndarray:
        """Unbiased covariance matrix ``m2 / (n - 1)``, shape (d, d).

        Raises
        ------
        ValueError
            If ``n < 2``.
        """
        if self.n < 2:
            raise ValueError("a covariance needs >= 2 complete rows")
        return self.m2 / (self.n - 1)

    def correlation(self) -> np.ndarray:
        """Pearson correlation matrix, shape (d, d); 0 off the diagonal for a constant feature.

        Raises
        ------
        ValueError
            If ``n < 2``.
        """
        self.covariance()  # validates n
        s = np.sqrt(np.clip(np.diag(self.m2), 0.0, None))
        with np.errstate(divide="ignore", invalid="ignore"):
            r = self.m2 / np.outer(s, s)
        r[~np.isfinite(r)] = 0.0
        np.fill_diagonal(r, 1.0)
        return np.clip(r, -1.0, 1.0)

    def kurtosis(self) -> np.ndarray:
        """Per feature kappa = n m4 / m2_ii^2 (3 for a normal; 1.0 for a constant), shape (d,).

        Examples
        --------
        >>> c = CoMoments()
        >>> c.update({"x": [-1.0, 1.0, -1.0, 1.0], "y": [0.0, 0.0, 0.0, 4.0]}, {}, 4)
        >>> [round(float(k), 4) for k in c.kurtosis()]
        [1.0, 2.3333]
        """
        s = np.diag(self.m2)
        with np.errstate(divide="ignore", invalid="ignore"):
            k = self.n * self.m4 / (s * s)
        return np.where(s > 0, k, 1.0)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (for MessagePack): the upper triangle of ``m2`` only."""
        iu = np.triu_indices(self.dim)
        return {"names": list(self.names), "n": self.n, "excl": self.excluded,
                "mean": pack_floats(self.mean), "m2": pack_floats(self.m2[iu]),
                "m3": pack_floats(self.m3), "m4": pack_floats(self.m4)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CoMoments:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        ValueError
            If the arrays do not fit the names.
        """
        names = d["names"]
        c = cls(names, max_features=max(MAX_FEATURES, len(names)))
        c.n, c.excluded = int(d["n"]), int(d["excl"])
        mean, upper = unpack_floats(d["mean"]), unpack_floats(d["m2"])
        m3, m4 = unpack_floats(d["m3"]), unpack_floats(d["m4"])
        k = len(names)
        if (mean.shape != (k,) or upper.shape != (k * (k + 1) // 2,) or m3.shape != (k,)
                or m4.shape != (k,)):
            raise ValueError("corrupt profile: co-moment arrays do not fit their features")
        iu = np.triu_indices(k)
        c.mean, c.m3, c.m4 = mean, m3, m4
        c.m2[iu] = upper
        c.m2.T[iu] = upper
        return c


def _missing(name: str) -> int:
    raise KeyError(name)
