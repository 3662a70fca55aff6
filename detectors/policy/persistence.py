"""k-of-m window persistence and auto-resolve: alert episodes from window outcomes.

A *series* is one (model, feature, check). Each window in which the check ran
with a valid p-value contributes one :class:`Outcome`: a *breach* (the FDR
gate discovered it and its effect cleared the floor) or healthy. Windows where
the check could not decide (insufficient data, inconclusive, error) contribute
nothing, so they neither confirm nor resolve an alert.

An episode *fires* at the first window where at least ``k`` of the last ``m``
outcomes are breaches, or at a breach whose evidence is overwhelming
(:class:`ImmediateRule`: persistence guards against the noise of subtle
breaches, and an overwhelming one is not noise); while it fires, every further breach is evidence of
the same episode (no new alert); it *resolves* at the ``resolve_after``-th
consecutive healthy outcome after its last breach. The episode is named by its
first breach inside the firing span, so re-folding a longer history never
renames it.

The fold is a pure function of the outcomes ordered by window start, so any
replica that sees the same outcomes derives the same episodes, whatever the
order in which windows were evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import Field, model_validator

from detectors.strict import StrictModel


class PersistenceConfig(StrictModel):
    """How many windows must breach before an alert fires, and when it resolves.

    Examples
    --------
    >>> PersistenceConfig().k, PersistenceConfig().m, PersistenceConfig().resolve_after
    (2, 3, 3)
    """

    k: int = Field(2, ge=1, le=20, description="Breaching windows needed among the last m")
    m: int = Field(3, ge=1, le=20, description="Windows looked at for persistence")
    resolve_after: int = Field(3, ge=1, le=100,
                               description="Consecutive healthy windows that resolve an alert")

    model_config = {"extra": "forbid"}

    @model_validator(mode="after")
    def _k_le_m(self) -> PersistenceConfig:
        if self.k > self.m:
            raise ValueError("k must be <= m")
        return self

    @property
    def quiet_after(self) -> int:
        """Consecutive healthy outcomes after which the past cannot matter any more."""
        return max(self.m, self.resolve_after)


#: Data-quality checks whose breach is a break, not a rhythm (volume follows a seasonal
#: expectation and keeps the drift ratio).
QUALITY_BREAK_CHECKS = frozenset({"null_rate", "type_mismatch", "nonfinite", "out_of_range"})


@dataclass(frozen=True)
class ImmediateRule:
    """When a breach pages at its first window instead of waiting for k of m.

    A breach is *overwhelming* when its p-value is at most ``p_ratio`` times
    the FDR gate's level for its window (the batch level alpha_b) and its
    effect is at least ``effect_ratio`` times its floor -- or
    ``quality_effect_ratio`` times for a data-quality break
    (:data:`QUALITY_BREAK_CHECKS`: a null-rate jump, type mismatches,
    non-finite or out-of-range values, which have no seasonal rhythm).

    Parameters
    ----------
    effect_ratio : float
        >= 1; ``inf`` disables the rule for drift and performance checks.
    quality_effect_ratio : float
        >= 1; ``inf`` disables it for data-quality breaks.
    p_ratio : float
        In (0, 1]: how far below the gate's level the p-value must lie.

    Raises
    ------
    ValueError
        On a ratio out of range.

    Notes
    -----
    Persistence buys precision against breaches that are discoveries by a
    small margin (a p-value near the gate's level, an effect near its floor):
    among those, a false discovery or a transient rhythm is plausible, and a
    second breaching window is cheap evidence. A breach with p <= 10^-3
    alpha_b and an effect three times its floor is neither: under the
    interval null "effect <= floor" a false one has probability
    p_ratio x alpha_b, a thousandth of the gate's own error rate. The
    defaults (3, 1, 10^-3) are settings (``FLEETWATCH_IMMEDIATE_*``).

    Examples
    --------
    >>> rule = ImmediateRule()
    >>> rule.applies("psi", effect=0.7, floor=0.2, p_value=1e-12, level=1e-5)
    True
    >>> rule.applies("psi", effect=0.5, floor=0.2, p_value=1e-12, level=1e-5)  # 2.5 x floor
    False
    >>> rule.applies("null_rate", effect=0.35, floor=0.1, p_value=1e-40, level=1e-5)
    True
    >>> rule.applies("null_rate", effect=0.35, floor=0.1, p_value=1e-7, level=1e-5)
    False

    A volume change is a ratio (effect = count / expected - 1, at least -1), so a drop is
    measured as the fold change a rise would be (:func:`volume_fold_change`): a window
    holding a fifth of its expected records is as overwhelming as one holding five
    times as many, where 3 x a 0.3 floor would ask a drop of 90 %:

    >>> rule.applies("volume", effect=-0.8, floor=0.3, p_value=1e-12, level=1e-5)
    True
    >>> rule.applies("volume", effect=-0.4, floor=0.3, p_value=1e-12, level=1e-5)  # x 1/1.67
    False
    """

    effect_ratio: float = 3.0
    quality_effect_ratio: float = 1.0
    p_ratio: float = 1e-3

    def __post_init__(self) -> None:
        if not (self.effect_ratio >= 1.0 and self.quality_effect_ratio >= 1.0):
            raise ValueError("effect ratios must be >= 1 (inf disables)")
        if not 0.0 < self.p_ratio <= 1.0:
            raise ValueError("p_ratio must be in (0, 1]")

    def applies(self, check: str, effect: float, floor: float, p_value: float, level: float) -> bool:
        """Is a breach of ``check`` with this effect, floor and p-value, gated at
        batch level ``level``, overwhelming? (The caller checks that it breached.)"""
        base = check.split("@", 1)[0]
        ratio = self.quality_effect_ratio if base in QUALITY_BREAK_CHECKS else self.effect_ratio
        if math.isinf(ratio):
            return False
        size = volume_fold_change(effect) if base == "volume" else abs(effect)
        return p_value <= self.p_ratio * level and size >= ratio * floor


def volume_fold_change(effect: float) -> float:
    """A volume effect (count / expected - 1) as the fold change above 1 that it is, a
    drop read as the rise of the same ratio: max(r, 1 / r) - 1 with r = 1 + effect (inf for
    an empty window).

    Examples
    --------
    >>> volume_fold_change(1.0), volume_fold_change(-0.5), volume_fold_change(-1.0)
    (1.0, 1.0, inf)
    """
    r = 1.0 + effect
    return math.inf if r <= 0 else max(r, 1.0 / r) - 1.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """One window's outcome for one series.

    Attributes
    ----------
    window_start : int
        Unix seconds.
    member : str
        The window's index member (``len:start:version``); orders windows of
        equal start and names the episode.
    breach : bool
    effect_size, p_value, floor : float
        As tested (for the alert's evidence and severity).
    immediate : bool
        A breach whose evidence is overwhelming (:class:`ImmediateRule`): it fires
        without waiting for k of m.
    looked_at : float or None
        Event time of the first look inside the open window that found the breach
        overwhelming (service.profiles.looks), None if none did: when the episode fires at
        this window, its evidence was complete then.
    """

    window_start: int
    member: str
    breach: bool
    effect_size: float = 0.0
    p_value: float = 1.0
    floor: float = 0.0
    immediate: bool = False
    looked_at: float | None = None


@dataclass
class Episode:
    """One alert's life in a series.

    Attributes
    ----------
    first : Outcome
        The first breach of the span that fired it (names the alert).
    fired : Outcome
        The window at which k of m was reached.
    evidence : list of Outcome
        Every breach from ``first`` on while the episode was open.
    resolved : Outcome or None
        The healthy window that resolved it; None while it fires.
    """

    first: Outcome
    fired: Outcome
    evidence: list[Outcome] = field(default_factory=list)
    resolved: Outcome | None = None


def episodes(outcomes: Sequence[Outcome], config: PersistenceConfig) -> list[Episode]:
    """Fold a series' outcomes into alert episodes, oldest first.

    Parameters
    ----------
    outcomes : sequence of Outcome
        Any order; duplicates of a member count once.
    config : PersistenceConfig

    Returns
    -------
    list of Episode

    Examples
    --------
    >>> def o(i, b): return Outcome(i, f"300:{i}:v", b)
    >>> ep = episodes([o(1, True), o(2, False), o(3, True), o(4, True), o(5, False),
    ...                o(6, False), o(7, False)], PersistenceConfig())
    >>> [(e.first.window_start, e.fired.window_start, len(e.evidence), e.resolved.window_start)
    ...  for e in ep]
    [(1, 3, 3, 7)]
    >>> episodes([o(1, True), o(2, False), o(3, False), o(4, True)], PersistenceConfig())
    []
    >>> [e.fired.window_start for e in episodes([Outcome(1, "300:1:v", True, immediate=True)],
    ...                                         PersistenceConfig())]
    [1]
    """
    ordered = sorted({o.member: o for o in outcomes}.values(),
                     key=lambda o: (o.window_start, o.member))
    out: list[Episode] = []
    recent: list[Outcome] = []
    current: Episode | None = None
    healthy = 0
    for o in ordered:
        if current is not None:
            if o.breach:
                current.evidence.append(o)
                healthy = 0
            else:
                healthy += 1
                if healthy >= config.resolve_after:
                    current.resolved = o
                    current, recent = None, []
            continue
        recent = (recent + [o])[-config.m:]
        breaches = [r for r in recent if r.breach]
        if o.breach and (len(breaches) >= config.k or o.immediate):
            current = Episode(first=breaches[0], fired=o, evidence=breaches)
            out.append(current)
            healthy = 0
    return out


def settled_prefix(outcomes: Sequence[Outcome], config: PersistenceConfig) -> int:
    """How many of the oldest (ordered) outcomes can be forgotten.

    Everything up to the end of the latest run of ``quiet_after`` consecutive
    healthy outcomes: after such a run no episode is open and no persistence
    span reaches back past it, so folding the rest gives the same new episodes.

    Examples
    --------
    >>> def o(i, b): return Outcome(i, f"300:{i}:v", b)
    >>> settled_prefix([o(1, True), o(2, False), o(3, False), o(4, False), o(5, True)],
    ...                PersistenceConfig())
    4
    """
    ordered = sorted(outcomes, key=lambda o: (o.window_start, o.member))
    run, cut = 0, 0
    for i, o in enumerate(ordered):
        run = 0 if o.breach else run + 1
        if run >= config.quiet_after:
            cut = i + 1
    return cut
