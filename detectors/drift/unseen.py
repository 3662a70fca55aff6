"""New-category share and vanished-category share: mass on categories the other side never had."""

from __future__ import annotations

import math
from collections.abc import Mapping

from scipy import special

from detectors.result import TestResult, insufficient, judged
from sketches.categorical import CategoricalSketch, legacy_counts

MIN_COUNT = 30


def exact_counts(sketch: CategoricalSketch, legacy: bool = False) -> Mapping[str, int] | None:
    """Every category's count, when the sketch still knows them exactly; else None.

    Exact mode: the exact table. Sketch mode: the frequent-items counters
    while their error bound (:attr:`~sketches.categorical.CategoricalSketch.frequency_error`)
    is 0, i.e. while the map has held every category seen (up to
    0.75 * 2**FI_LG_MAX_MAP_SIZE = 768 categories), and only if they add up
    to the sketch's count. ``legacy``: keyed by
    :func:`~sketches.categorical.legacy_label` (to compare with a profile
    written before typed keys).

    Examples
    --------
    >>> s = CategoricalSketch(); s.update(["a", "a", "b"]); dict(exact_counts(s))
    {'a': 2, 'b': 1}
    >>> s.update([f"v{i}" for i in range(300)])  # 302 categories: the exact table
    >>> len(exact_counts(s)), exact_counts(s)["a"]
    (302, 2)
    >>> s.update([f"w{i}" for i in range(5_000)]); exact_counts(s) is None
    True
    """
    if sketch.is_exact:
        return legacy_counts(sketch.exact) if legacy and sketch.typed else sketch.exact
    if sketch.frequency_error == 0:
        counts = sketch.frequencies(legacy=legacy)
        if sum(counts.values()) == sketch.count:
            return counts
    return None


def good_turing(counts: Mapping[str, int], n: int) -> tuple[float, float]:
    """Good-Turing estimate of the mass of categories absent from a sample, and its variance.

    Parameters
    ----------
    counts : mapping of category -> count
        Every category of the sample with its count (> 0).
    n : int
        Sample size (the sum of the counts), >= 1.

    Returns
    -------
    estimate, variance : float
        f1 / n and (f1 + 2 f2 - f1^2 / n) / n^2, f_k the number of categories
        seen exactly k times (Good, "The population frequencies of species
        and the estimation of population parameters", 1953; Esty, "A normal
        limit law for a nonparametric estimator of the coverage of a random
        sample", 1983), the variance floored at 2 / n^2 so that a sample
        without singletons still allows for the rare categories it missed.

    Examples
    --------
    >>> good_turing({"a": 2, "b": 1, "c": 1}, 4)
    (0.5, 0.1875)
    >>> good_turing({"a": 10}, 10)
    (0.0, 0.02)
    """
    f1 = sum(1 for c in counts.values() if c == 1)
    f2 = sum(1 for c in counts.values() if c == 2)
    return f1 / n, max(f1 + 2 * f2 - f1 * f1 / n, 2.0) / n**2


def unseen_mass(other: CategoricalSketch) -> tuple[float, float]:
    """Good-Turing estimate of the mass of categories absent from ``other``, and its variance.

    Returns
    -------
    estimate, variance : float
        :func:`good_turing` while ``other``'s counts are known exactly
        (:func:`exact_counts`). Otherwise (no singleton counts): the share
        outside the tracked heavy hitters at their lower-bound counts, an
        upper bound, with variance estimate / n.

    Examples
    --------
    >>> s = CategoricalSketch(); s.update(["a", "a", "b", "c"])
    >>> unseen_mass(s)
    (0.5, 0.1875)
    >>> t = CategoricalSketch(); t.update(["a"] * 10); unseen_mass(t)
    (0.0, 0.02)
    """
    n = other.count
    counts = exact_counts(other)
    if counts is not None:
        return good_turing(counts, n)
    tracked = other.frequencies()
    rest = min(max(n - sum(tracked.values()) + len(tracked) * other.frequency_error, 0) / n, 1.0)
    return rest, max(rest / n, 1 / n**2)


def share_interval(side: CategoricalSketch, other: Mapping[str, int],
                   legacy: bool = False) -> tuple[float, float, float]:
    """Share of ``side``'s values in categories absent from ``other``: estimate and certain bounds.

    Parameters
    ----------
    side : CategoricalSketch
        Non-empty; exact or sketched.
    other : mapping of category -> count
        Every category of the other side (:func:`exact_counts`).
    legacy : bool
        ``other`` is keyed by legacy labels (see :func:`exact_counts`).

    Returns
    -------
    estimate, lower, upper : float
        ``lower <= S <= upper`` always holds for the true share S. Exact
        ``side``: all three equal S. Sketched ``side``: S = 1 - (side's
        values in ``other``'s categories) / n_side, and each of those
        categories' count lies in ``side.count_interval`` (the frequent-items
        lower bound; the smaller of its upper bound and the count-min
        estimate, which never undercounts), so ``lower`` and ``upper`` add
        up those intervals' ends; ``estimate`` takes each count as the sketch
        reports it (:meth:`~sketches.categorical.CategoricalSketch.estimate`,
        kept within the count's certain interval).
        A category that ``other`` never had is never subtracted, so its
        values always count in full; the bounds are at most
        len(other) * frequency_error / n_side apart (each interval is at most
        the frequent-items error wide, and untracked categories' upper ends
        are further capped by the count-min estimate).

    Examples
    --------
    >>> s = CategoricalSketch(); s.update(["a"] * 6 + ["new"] * 4)
    >>> share_interval(s, {"a": 3, "b": 1})
    (0.4, 0.4, 0.4)
    """
    n = side.count
    table = exact_counts(side, legacy)
    if table is not None:
        s = sum(c for k, c in table.items() if k not in other) / n
        return s, s, s
    lower = upper = reported = 0
    for category in other:
        lo, hi = side.count_interval(category, legacy)
        lower, upper = lower + lo, upper + hi
        reported += min(max(side.estimate(category, legacy), lo), hi)
    return (n - reported) / n, max(n - upper, 0) / n, (n - lower) / n


def unseen_share_test(
    check: str,
    side: CategoricalSketch,
    other: CategoricalSketch,
    feature: str = "",
    *,
    current_is_side: bool,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Share of ``side``'s values in categories ``other`` never had, against its H0 expectation.

    Parameters
    ----------
    check : str
        ``"new_category"`` (side = current, other = baseline) or
        ``"vanished_category"`` (side = baseline, other = current).
    side, other : CategoricalSketch
    feature : str
    current_is_side : bool
        Which of the two is the current window (for ``n_current``/``n_baseline``).
    floor : float
        Share tolerated above the expectation.
    alpha, min_count
        Level for ``drift``; non-missing values needed on each side.

    Returns
    -------
    TestResult
        ``statistic`` = z of the estimated share, ``effect_size`` = the
        estimated share S, ``error_bound`` = the width of the interval that
        certainly holds S (0 when ``side``'s counts are exact; see
        :func:`share_interval`). ``insufficient_data`` when ``other`` has
        more categories than its sketch counts exactly (see Notes).

    Notes
    -----
    Under H0 both sides sample one distribution, and each of ``side``'s n
    values falls on a category absent from ``other`` with probability M0, the
    mass ``other`` has not seen: E[S | other] = M0, Var = M0 (1 - M0) / n.
    M0 is estimated by Good-Turing (:func:`good_turing`), whose error adds its
    variance: z = (S - M0_hat - floor) / sqrt(Var_GT + M0_hat (1 - M0_hat) / n),
    one-sided. The same formula serves both checks, so new and vanished
    categories are treated symmetrically.

    Sketch mode. The test needs ``other``'s full category table: which
    categories it lacks, and its singleton and doubleton counts for M0. Its
    frequent-items sketch keeps that exactly while it has held every
    category (up to 768; :func:`exact_counts`). With more, an untracked
    category may have been seen up to eps N times or never, and M0 is not
    identifiable (estimates from heavy hitters alarmed in 15 % of H0 pairs
    at n = 1e4): the result is ``insufficient_data``. ``side`` may be
    sketched at any size: its share lies in a certain interval
    (:func:`share_interval`), the p-value is taken at the interval's lower
    end (sketch error resolved in favour of "no new categories") and the
    status is ``inconclusive`` when only the estimate is significant.

    Examples
    --------
    >>> ref, cur = CategoricalSketch(), CategoricalSketch()
    >>> ref.update(["a"] * 50 + ["b"] * 50); cur.update(["a"] * 50 + ["new"] * 50)
    >>> r = unseen_share_test("new_category", cur, ref, current_is_side=True)
    >>> r.effect_size, r.status.value
    (0.5, 'drift')
    """
    n_side, n_other = int(side.count), int(other.count)
    n_cur, n_ref = (n_side, n_other) if current_is_side else (n_other, n_side)
    if n_side < min_count or n_other < min_count:
        return insufficient(check, feature, n_cur, n_ref,
                            f"needs >= {min_count} non-missing values on each side")
    legacy = not (side.typed and other.typed)  # one side keyed before typed keys: its labels
    other_counts = exact_counts(other, legacy)
    if other_counts is None:
        whose = "baseline" if current_is_side else "current window"
        return insufficient(check, feature, n_cur, n_ref,
                            f"the {whose} has more categories than its sketch counts exactly: which "
                            "categories it lacks, and its unseen mass, are not identifiable")
    share, lower, upper = share_interval(side, other_counts, legacy)
    m0, var_gt = good_turing(other_counts, n_other)
    sd = math.sqrt(var_gt + m0 * (1 - m0) / n_side)
    p = float(special.ndtr(-(lower - m0 - floor) / sd))
    p_exact = float(special.ndtr(-(share - m0 - floor) / sd))
    return judged(check, feature, (share - m0) / sd, share, p, n_cur, n_ref, p_exact=p_exact,
                  error_bound=upper - lower, floor=floor, alpha=alpha)


def new_category_test(reference: CategoricalSketch, current: CategoricalSketch, feature: str = "",
                      **kwargs: float) -> TestResult:
    """Share of current values in categories the baseline never had (see :func:`unseen_share_test`).

    Examples
    --------
    >>> ref, cur = CategoricalSketch(), CategoricalSketch()
    >>> ref.update(["a", "b"] * 50); cur.update(["a", "b"] * 50)
    >>> new_category_test(ref, cur).effect_size
    0.0
    """
    return unseen_share_test("new_category", current, reference, feature,
                             current_is_side=True, **kwargs)


def vanished_category_test(reference: CategoricalSketch, current: CategoricalSketch,
                           feature: str = "", **kwargs: float) -> TestResult:
    """Share of baseline values in categories absent from the current window.

    Examples
    --------
    >>> ref, cur = CategoricalSketch(), CategoricalSketch()
    >>> ref.update(["a", "b"] * 50); cur.update(["a"] * 100)
    >>> r = vanished_category_test(ref, cur)
    >>> r.effect_size, r.status.value
    (0.5, 'drift')
    """
    return unseen_share_test("vanished_category", reference, current, feature,
                             current_is_side=False, **kwargs)
