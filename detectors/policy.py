"""Alert policy: which test results become alerts.

A rule pairs an effect-size test with a significance test on the same
feature: an alert fires only when the effect clears its floor *and* the
significance test's p-value is below alpha. This keeps large windows (where
every tiny change is significant) and small windows (where effects are noisy)
from paging. Online FDR control, persistence and grouping plug in after
:meth:`EffectFloorPolicy.decide` (see ``AlertCandidate``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from detectors.result import Status, TestResult


@dataclass(frozen=True, slots=True)
class Rule:
    """``effect_check``'s effect >= ``floor`` and ``significance_check``'s p < alpha."""

    effect_check: str
    floor: float
    significance_check: str


DEFAULT_RULES = (
    Rule("psi", 0.2, "ks"),
    Rule("js", 0.1, "chi2"),
    Rule("null_rate", 0.1, "null_rate"),
)


@dataclass(frozen=True, slots=True)
class AlertCandidate:
    """A feature's test results that cleared a rule."""

    feature: str
    check: str
    effect: TestResult
    significance: TestResult

    @property
    def p_value(self) -> float:
        return self.significance.p_value if self.significance.p_value is not None else 1.0


@dataclass(frozen=True)
class EffectFloorPolicy:
    """Effect floor plus significance gate.

    Parameters
    ----------
    rules : tuple[Rule, ...]
    alpha : float
        Significance level for each rule's test, in (0, 1).

    Raises
    ------
    ValueError
        If ``alpha`` is not in (0, 1) or a floor is negative.
    """

    rules: tuple[Rule, ...] = DEFAULT_RULES
    alpha: float = 0.01
    _by_effect: dict[str, Rule] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError("alpha must be in (0, 1)")
        if any(r.floor < 0 for r in self.rules):
            raise ValueError("floors must be >= 0")
        object.__setattr__(self, "_by_effect", {r.effect_check: r for r in self.rules})

    def decide(self, results: list[TestResult]) -> list[AlertCandidate]:
        """Alert candidates among one window's results."""
        index = {(r.feature, r.check): r for r in results}
        out = []
        for r in results:
            rule = self._by_effect.get(r.check)
            if rule is None or r.status != Status.OK or r.effect_size is None:
                continue
            sig = index.get((r.feature, rule.significance_check))
            if sig is None or sig.status != Status.OK or sig.p_value is None:
                continue
            if abs(r.effect_size) >= rule.floor and sig.p_value < self.alpha:
                out.append(AlertCandidate(r.feature, r.check, r, sig))
        return out
