"""Effect floor: which test results may alert, and which clear their floor.

A result is *eligible* when its check may alert for its feature
(configuration) and it decided (status ok or drift, with an effect and a
p-value). An eligible result *breaches* when its p-value, which tests the
interval null "effect <= floor", is discovered by the gate and its effect
clears the floor. This keeps large windows (where every tiny change is
significant) and small windows (where effects are noisy) from paging.

:class:`EffectFloorPolicy` is the per-window gate with a fixed alpha (no
false-discovery control across tests); the service gates with the fleet's
online FDR procedure (``detectors.fdr.epoch``) instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from detectors.result import Status, TestResult


@dataclass(frozen=True, slots=True)
class AlertCandidate:
    """A test result that cleared the policy."""

    feature: str
    check: str
    result: TestResult

    @property
    def p_value(self) -> float:
        return self.result.p_value if self.result.p_value is not None else 1.0


@dataclass(frozen=True)
class EffectFloorPolicy:
    """Effect floor plus significance gate.

    Parameters
    ----------
    alerting : Mapping[str, frozenset[str]]
        Per feature, the checks that may alert (see
        :func:`detectors.suite.alerting_checks`).
    alpha : float
        Significance level of each test, in (0, 1).

    Raises
    ------
    ValueError
        If ``alpha`` is not in (0, 1).

    Examples
    --------
    >>> from detectors.result import judged
    >>> r = judged("psi", "x", 0.5, 0.5, 1e-9, 100, 100, floor=0.2)
    >>> [c.check for c in EffectFloorPolicy({"x": frozenset({"psi"})}).decide([r])]
    ['psi']
    >>> EffectFloorPolicy({"x": frozenset({"ks"})}).decide([r])
    []
    """

    alerting: Mapping[str, frozenset[str]] = field(default_factory=dict)
    alpha: float = 0.01

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError("alpha must be in (0, 1)")

    def decide(self, results: list[TestResult]) -> list[AlertCandidate]:
        """Alert candidates among one window's results: eligible, ``|effect| >= floor``
        and ``p < alpha``."""
        return [AlertCandidate(r.feature, r.check, r) for r in eligible(results, self.alerting)
                if clears_floor(r) and r.p_value < self.alpha]


def eligible(results: list[TestResult], alerting: Mapping[str, frozenset[str]]) -> list[TestResult]:
    """The results that may alert: check in ``alerting[feature]``, status ok or drift
    (not inconclusive, insufficient or error), effect and p-value present."""
    return [r for r in results
            if r.check in alerting.get(r.feature, ())
            and r.status in (Status.OK, Status.DRIFT)
            and r.effect_size is not None and r.p_value is not None]


def clears_floor(r: TestResult) -> bool:
    """``|effect| >= floor``."""
    return r.effect_size is not None and abs(r.effect_size) >= r.floor
