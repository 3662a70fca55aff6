"""Predicted-class rate drift: the largest change of any class's share."""

from __future__ import annotations

from detectors.drift.bins import aligned_counts
from detectors.quality.proportion import MIN_COUNT, rate_change
from detectors.result import TestResult, insufficient, judged
from sketches.categorical import CategoricalSketch


def class_rate_test(
    reference: CategoricalSketch,
    current: CategoricalSketch,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Has the rate of any predicted class moved by more than ``floor``?

    Parameters
    ----------
    reference, current : CategoricalSketch
        Predicted labels of the baseline and the current window.
    feature : str
        Usually ``"__prediction__"``.
    floor : float
        Change of a class's rate tolerated under the null, in [0, 1].
    alpha, min_count
        Level for ``drift``; predictions needed on each side.

    Returns
    -------
    TestResult
        ``statistic`` = z of the class with the largest |change|,
        ``effect_size`` = that change (current rate - baseline rate, e.g. the
        positive rate's change for a binary classifier), ``p_value`` =
        min(1, k * min_c p_c) over the k classes (k >= 3), p_c of either class
        for two.

    Notes
    -----
    One two-proportion z-test per class (Agresti 2013, sec. 3.1),
    Bonferroni-combined (Dunn, "Multiple comparisons among means", 1961),
    which holds under any dependence between the classes' rates. Two classes
    are one test: their rates sum to 1, so their changes are opposite, with
    the same pooled variance and the same p (Bonferroni over both doubled it:
    a binary classifier's class rate alarmed in 2 % of H0 pairs at alpha 0.05).

    Examples
    --------
    >>> a, b = CategoricalSketch(), CategoricalSketch()
    >>> a.update(["true"] * 100 + ["false"] * 900); b.update(["true"] * 300 + ["false"] * 700)
    >>> r = class_rate_test(a, b, floor=0.05)
    >>> round(abs(r.effect_size), 2), r.status.value
    (0.2, 'drift')
    """
    n_ref, n_cur = int(reference.count), int(current.count)
    if n_ref < min_count or n_cur < min_count:
        return insufficient("class_rate", feature, n_cur, n_ref,
                            f"needs >= {min_count} predictions on each side")
    _cats, ref, cur = aligned_counts(reference, current)
    tests = [rate_change(int(r), n_ref, int(c), n_cur, floor) for r, c in zip(ref, cur, strict=True)]
    z, diff, _p = max(tests, key=lambda t: abs(t[1]))
    k = len(tests) if len(tests) > 2 else 1
    p = min(1.0, k * min(t[2] for t in tests))
    return judged("class_rate", feature, z, diff, p, n_cur, n_ref, floor=floor, alpha=alpha)
