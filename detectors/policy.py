"""Alert policy: which test results become alerts.

A result becomes an alert candidate when its check may alert for its feature
(configuration), its effect clears the floor *and* its p-value, which tests
the interval null "effect <= floor", is below alpha. This keeps large windows
(where every tiny change is significant) and small windows (where effects are
noisy) from paging. Online FDR control (replacing the fixed alpha),
persistence and grouping plug in after :meth:`EffectFloorPolicy.decide`
(see ``AlertCandidate``).
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
        """Alert candidates among one window's results.

        A candidate: check in ``alerting[feature]``, status ok or drift (not
        inconclusive, insufficient or error), ``|effect| >= floor`` and
        ``p < alpha``.
        """
        out = []
        for r in results:
            if r.check not in self.alerting.get(r.feature, ()):
                continue
            if r.status not in (Status.OK, Status.DRIFT) or r.effect_size is None or r.p_value is None:
                continue
            if abs(r.effect_size) >= r.floor and r.p_value < self.alpha:
                out.append(AlertCandidate(r.feature, r.check, r))
        return out
