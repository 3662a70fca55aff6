"""The result every detector returns."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class Status(enum.StrEnum):
    """Outcome of one test."""

    OK = "ok"
    DRIFT = "drift"
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
        Feature name (``"__score__"`` for the model score).
    statistic : float or None
        The test statistic (PSI, KS D, chi-square, JS distance, z).
    effect_size : float or None
        The effect the alert policy compares with its floor (PSI, KS D,
        JS distance, null-rate difference).
    p_value : float or None
        Probability under H0 of a statistic at least as extreme; None for
        statistics without a sampling distribution (PSI).
    n_current, n_baseline : int
        Values each side contributed.
    error_bound : float
        The sketch error accounted for (e.g. rank error of both t-digests for KS).
    status : Status
    reason : str
        Why the status, in words (always set for insufficient_data and error).
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

    def __post_init__(self) -> None:
        for name in ("statistic", "effect_size", "p_value"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ValueError(f"{name} must be finite or None, got {v}")


def insufficient(check: str, feature: str, n_current: int, n_baseline: int, reason: str) -> TestResult:
    """A result saying the test could not run on this little data."""
    return TestResult(
        check, feature, None, None, None, n_current, n_baseline,
        status=Status.INSUFFICIENT_DATA, reason=reason,
    )
