"""Exact conditional test of homogeneity for a 2 x k table (small counts)."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

MAX_STATES = 20_000


def exact_homogeneity_p(ref: np.ndarray, cur: np.ndarray, max_states: int = MAX_STATES) -> float | None:
    """Exact p-value of Pearson's chi-square for a 2 x k table, given its margins.

    Parameters
    ----------
    ref, cur : np.ndarray of int, shape (k,)
        Counts of the baseline and current rows; every column total > 0.
    max_states : int
        Work limit; beyond it the function gives up and returns None.

    Returns
    -------
    float or None
        P(X^2 >= X^2_obs) over all tables with the observed row and column
        totals, each with its multivariate hypergeometric probability
        prod_j C(c_j, x_j) / C(N, n_cur). None when the enumeration would
        exceed ``max_states``.

    Notes
    -----
    The Freeman-Halton conditional test (Freeman & Halton, "Note on an exact
    treatment of contingency, goodness of fit and other problems of
    significance", 1951), ordered by Pearson's X^2 rather than by the table's
    probability. Because X^2 = N^2 / (n_cur n_ref) * sum_j (x_j - c_j n_cur / N)^2 / c_j
    is a sum over columns, the null distribution is built column by column
    (dynamic programming over the running row total and running X^2), with
    exact integer weights.

    Examples
    --------
    >>> round(exact_homogeneity_p(np.array([3, 1]), np.array([1, 3])), 4)
    0.4857
    >>> exact_homogeneity_p(np.array([5, 5]), np.array([5, 5]))
    1.0
    """
    ref = np.asarray(ref, dtype=np.int64)
    cur = np.asarray(cur, dtype=np.int64)
    cols = (ref + cur).tolist()
    n1, total = int(cur.sum()), int(ref.sum() + cur.sum())
    expected = [c * n1 / total for c in cols]

    def term(j: int, x: int) -> float:
        return (x - expected[j]) ** 2 / cols[j]

    observed = sum(term(j, int(x)) for j, x in enumerate(cur.tolist()))
    remaining = np.concatenate((np.cumsum(cols[::-1])[::-1][1:], [0])).tolist()
    states: dict[int, dict[float, int]] = {0: {0.0: 1}}
    for j, c in enumerate(cols):
        nxt: dict[int, dict[float, int]] = defaultdict(lambda: defaultdict(int))
        size = 0
        for s, dist in states.items():
            lo, hi = max(0, n1 - s - remaining[j]), min(c, n1 - s)
            for x in range(lo, hi + 1):
                w, t = math.comb(c, x), term(j, x)
                row = nxt[s + x]
                for stat, weight in dist.items():
                    row[round(stat + t, 9)] += weight * w
            size += len(nxt)
        states = nxt
        if sum(len(d) for d in states.values()) > max_states or size > max_states:
            return None
    tail = sum(w for stat, w in states[n1].items() if stat >= observed - 1e-7 * (1 + observed))
    return min(tail / math.comb(total, n1), 1.0)
