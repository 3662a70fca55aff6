"""Alert severity from how far the effect cleared its floor, and the model's tier."""

from __future__ import annotations

import math

SEVERITIES = ("info", "warning", "critical")

#: Per model tier: (effect / floor ratio from which an alert is critical, from which it is
#: warning). Tier 1 (business critical) escalates sooner; tier 3 (best effort) never pages
#: as critical.
TIER_RATIOS: dict[int, tuple[float, float]] = {1: (2.0, 1.0), 2: (3.0, 1.0), 3: (math.inf, 3.0)}


def severity(effect_size: float, floor: float, tier: int) -> str:
    """The severity of a breach.

    Parameters
    ----------
    effect_size : float
        The tested effect (its magnitude is used).
    floor : float
        The check's effect floor (>= 0; a zero floor makes every breach the
        tier's top severity).
    tier : int
        The model's tier, 1..3.

    Returns
    -------
    str
        ``"critical"``, ``"warning"`` or ``"info"``.

    Raises
    ------
    ValueError
        If ``tier`` is not 1, 2 or 3.

    Examples
    --------
    >>> severity(0.5, 0.2, 2), severity(0.3, 0.2, 2), severity(0.45, 0.2, 1), severity(0.3, 0.2, 3)
    ('warning', 'warning', 'critical', 'info')
    """
    if tier not in TIER_RATIOS:
        raise ValueError("tier must be 1, 2 or 3")
    critical_at, warning_at = TIER_RATIOS[tier]
    ratio = math.inf if floor <= 0 else abs(effect_size) / floor
    if ratio >= critical_at:
        return "critical"
    return "warning" if ratio >= warning_at else "info"


def highest(severities: list[str]) -> str:
    """The most severe of ``severities`` (``"info"`` when empty).

    Examples
    --------
    >>> highest(["warning", "critical", "info"])
    'critical'
    """
    return max(severities, key=SEVERITIES.index, default="info")
