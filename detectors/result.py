"""The result every detector returns, and how a detector decides its status."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class Status(enum.StrEnum):
    """Outcome of one test.

    ``inconclusive``: the test is significant when the sketches are taken as
    exact but not once their error bound is accounted for; the profiles are
    too coarse to decide, so the result never alerts.
    """

    OK = "ok"
    DRIFT = "drift"
    INCONCLUSIVE = "inconclusive"
    INSUFFICIENT_DATA = "insufficient_data"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class TestResult:
    """One test of one feature of one window against a baseline.

    Attributes
    ----------
    check : str
        Test name, e.g. ``"psi"``, ``"ks"``, ``"chi2"``, ``"js"``, ``"null_rate"``.
    feature : str
        Feature name (``"__score__"`` for the model score, ``"__prediction__"``
        for the predicted label, ``""`` for window-level tests such as volume).
    statistic : float or None
        The test statistic (PSI, KS D, chi-square, JS distance, z).
    effect_size : float or None
        The effect the alert policy compares with its floor (PSI, KS D,
        JS distance, null-rate difference, ...).
    p_value : float or None
        Probability, under the null hypothesis "effect <= floor", of a
        statistic at least as extreme, with the sketch error resolved in
        favour of the null (so sketch error never creates an alarm). ``None``
        only for results that did not run.
    n_current, n_baseline : int
        Values each side contributed.
    error_bound : float
        The sketch error accounted for, in the unit of the effect's inputs
        (e.g. rank error of both t-digests for KS, bin-mass error for PSI).
    status : Status
    reason : str
        Why the status, in words (always set unless the status is ``ok``).
    floor : float
        The effect floor of the interval null hypothesis the p-value tests
        (0.0: the point null "no change").
    floor_source : str
        Which floor that is: ``"configured"`` (the detector configuration's) or
        ``"learned"`` (the feature's own window-to-window movement, larger;
        :mod:`detectors.policy.learned`).
    floor_reason : str
        Why that floor, with the figures (empty when no learning was consulted).
    """

    __test__ = False  # not a pytest test class

    check: str
    feature: str
    statistic: float | None
    effect_size: float | None
    p_value: float | None
    n_current: int
    n_baseline: int
    error_bound: float = 0.0
    status: Status = Status.OK
    reason: str = ""
    floor: float = 0.0
    floor_source: str = "configured"
    floor_reason: str = ""

    def __post_init__(self) -> None:
        for name in ("statistic", "effect_size", "p_value"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ValueError(f"{name} must be finite or None, got {v}")


def insufficient(check: str, feature: str, n_current: int, n_baseline: int, reason: str) -> TestResult:
    """A result saying the test could not run on this little data.

    Examples
    --------
    >>> insufficient("ks", "x", 3, 500, "needs >= 30 values").status
    <Status.INSUFFICIENT_DATA: 'insufficient_data'>
    """
    return TestResult(
        check, feature, None, None, None, n_current, n_baseline,
        status=Status.INSUFFICIENT_DATA, reason=reason,
    )


def failed(check: str, feature: str, n_current: int, n_baseline: int, reason: str) -> TestResult:
    """A result saying the test raised (the reason names the exception).

    Examples
    --------
    >>> failed("ks", "x", 10, 10, "ValueError: bad").status
    <Status.ERROR: 'error'>
    """
    return TestResult(
        check, feature, None, None, None, n_current, n_baseline,
        status=Status.ERROR, reason=reason,
    )


def judged(
    check: str,
    feature: str,
    statistic: float,
    effect_size: float,
    p_value: float,
    n_current: int,
    n_baseline: int,
    *,
    p_exact: float | None = None,
    error_bound: float = 0.0,
    floor: float = 0.0,
    alpha: float = 0.05,
) -> TestResult:
    """A completed test with its status decided at level ``alpha``.

    Parameters
    ----------
    p_value : float
        p-value with the sketch error resolved in favour of the null.
    p_exact : float, optional
        p-value computed as if the sketches were exact; defaults to ``p_value``.
    floor : float
        Effect floor of the interval null; ``|effect_size| >= floor`` is
        required for ``drift`` as well.
    alpha : float
        Significance level in (0, 1).

    Returns
    -------
    TestResult
        ``drift`` when ``p_value < alpha`` and ``|effect_size| >= floor``;
        ``inconclusive`` when only ``p_exact`` is below ``alpha``; else ``ok``.
        p-values are clipped to [0, 1].

    Examples
    --------
    >>> judged("ks", "x", 0.2, 0.2, 0.001, 100, 100).status
    <Status.DRIFT: 'drift'>
    >>> judged("ks", "x", 0.2, 0.2, 0.3, 100, 100, p_exact=0.01).status
    <Status.INCONCLUSIVE: 'inconclusive'>
    """
    p = min(max(float(p_value), 0.0), 1.0)
    p0 = p if p_exact is None else min(max(float(p_exact), 0.0), 1.0)
    big_enough = abs(effect_size) >= floor
    if p < alpha and big_enough:
        status, reason = Status.DRIFT, f"p={p:.3g} < alpha={alpha:g} and |effect| >= floor={floor:g}"
    elif p0 < alpha and big_enough:
        status = Status.INCONCLUSIVE
        reason = f"p={p0:.3g} if the sketches were exact, {p:.3g} with error bound {error_bound:.3g}"
    else:
        status, reason = Status.OK, ""
    return TestResult(
        check, feature, float(statistic), float(effect_size), p, n_current, n_baseline,
        error_bound=float(error_bound), status=status, reason=reason, floor=float(floor),
    )
