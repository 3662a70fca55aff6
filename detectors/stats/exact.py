"""Exact conditional test of homogeneity for a 2 x k table (small counts)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable

import numpy as np

MAX_STATES = 20_000

#: column_terms(column_total, cur_counts) -> the column's statistic term for each current count
#: (the reference count being column_total - cur_count); the row totals are fixed by the caller.
ColumnTerms = Callable[[int, np.ndarray], np.ndarray]


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
    n1, total = int(np.sum(cur)), int(np.sum(ref) + np.sum(cur))

    def pearson_terms(c: int, x: np.ndarray) -> np.ndarray:
        return (x - c * n1 / total) ** 2 / c

    return exact_conditional_p(ref, cur, pearson_terms, max_states)


def exact_conditional_p(ref: np.ndarray, cur: np.ndarray, column_terms: ColumnTerms,
                        max_states: int = MAX_STATES) -> float | None:
    """Exact p-value of any column-additive statistic of a 2 x k table, given its margins.

    Parameters
    ----------
    ref, cur : np.ndarray of int, shape (k,)
        Counts of the baseline and current rows; every column total > 0.
    column_terms : callable
        ``column_terms(column_total, cur_counts)``: the statistic's term of
        one column for an array of possible current counts (Pearson's X^2,
        PSI or JS terms of the column's two masses).
    max_states : int
        Work limit; beyond it the function gives up and returns None.

    Returns
    -------
    float or None
        P(T >= T_obs), T = sum of the columns' terms, over all tables with
        the observed margins, each with its multivariate hypergeometric
        probability (the permutation distribution of the two samples).

    Notes
    -----
    Dynamic programming over the columns on (running current total, running
    statistic rounded to 1e-9), with exact integer weights C(c_j, x_j);
    the tail is taken with a relative tolerance of 1e-7 so that tables
    tied with the observed one count. A partial table whose statistic plus
    the least the remaining columns can add reaches the observed value is
    counted with all its completions, and one that cannot reach it even
    with the most they can add is dropped (the network algorithm's
    pruning: Mehta & Patel, "A network algorithm for performing Fisher's
    exact test in r x c contingency tables", 1983).

    Examples
    --------
    >>> chi2 = lambda c, x: (x - c / 2) ** 2 / c
    >>> round(exact_conditional_p(np.array([3, 1]), np.array([1, 3]), chi2), 4)
    0.4857
    """
    ref = np.asarray(ref, dtype=np.int64)
    cur = np.asarray(cur, dtype=np.int64)
    cols = (ref + cur).tolist()
    n1, total = int(cur.sum()), int(ref.sum() + cur.sum())
    terms = [column_terms(c, np.arange(c + 1, dtype=np.float64)).tolist() for c in cols]
    observed = sum(terms[j][int(x)] for j, x in enumerate(cur.tolist()))
    target = observed - 1e-7 * (1 + abs(observed))
    remaining = np.concatenate((np.cumsum(cols[::-1])[::-1][1:], [0])).tolist()
    # bounds on what the columns after j can still add (row totals ignored: looser, still valid)
    low_after = np.concatenate((np.cumsum([min(t) for t in terms][::-1])[::-1][1:], [0.0])).tolist()
    high_after = np.concatenate((np.cumsum([max(t) for t in terms][::-1])[::-1][1:], [0.0])).tolist()
    tail = 0  # weight of the partial tables already certain to reach the observed statistic
    states: dict[int, dict[float, int]] = {0: {0.0: 1}}
    for j, c in enumerate(cols):
        nxt: dict[int, dict[float, int]] = defaultdict(lambda: defaultdict(int))
        lo_j, hi_j = low_after[j], high_after[j]
        for s, dist in states.items():
            lo, hi = max(0, n1 - s - remaining[j]), min(c, n1 - s)
            for x in range(lo, hi + 1):
                w, t = math.comb(c, x), terms[j][x]
                row = nxt[s + x]
                completions = math.comb(remaining[j], n1 - s - x)
                for stat, weight in dist.items():
                    v = stat + t
                    if v + lo_j >= target:  # every completion reaches it (network pruning)
                        tail += weight * w * completions
                    elif v + hi_j >= target:  # some completion may
                        row[round(v, 9)] += weight * w
        states = {s: d for s, d in nxt.items() if d}
        if sum(len(d) for d in states.values()) > max_states:
            return None
    return min(tail / math.comb(total, n1), 1.0)
