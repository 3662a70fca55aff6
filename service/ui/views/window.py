""""Why did this page?": every test of one window with the gate's answer and the persistence state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.alerting.models import Alert
from service.profiles.keys import parse_member
from service.ui.views.common import Ctx, config_of, feature_label, ratio


@dataclass(frozen=True)
class TestLine:
    result: dict[str, Any]
    label: str
    ratio: float | None
    eligible: bool
    discovered: bool | None
    breach: bool | None
    alert: Alert | None


@dataclass(frozen=True)
class WindowView:
    model_id: str
    start: int
    end: int
    versions: list[str]
    count: int | None
    baseline: str | None
    gate: dict[str, Any] | None
    lines: list[TestLine]
    persistence: Any
    previous: int | None
    next: int | None


async def window_view(ctx: Ctx, model_id: str, start: int) -> WindowView | None:
    """Every test of one window with the gate's answer and the persistence state; None when
    no window of the model starts at ``start``."""
    members = await ctx.store.window_members(model_id, start, start)
    if not members:
        return None
    cfg = config_of((await ctx.store.model_configs([model_id]))[model_id])
    alerts = await ctx.alerts.alerts(model_id, 0, 500)
    lines: list[TestLine] = []
    gate = None
    baseline = None
    for member in sorted(members):
        results = await ctx.store.results(model_id, member) or []
        g = await ctx.alerts.gate(model_id, member)
        gate = gate or g
        tested = {(t["feature"], t["check"]): t for t in (g or {}).get("tests", [])}
        for r in results:
            baseline = baseline or r.get("baseline")
            t = tested.get((r["feature"], r["check"]))
            alert = next(
                (
                    a
                    for a in alerts
                    if a.feature == r["feature"]
                    and a.check == r["check"]
                    and a.window_start <= start <= (a.resolved_window_start or a.last_window_start)
                ),
                None,
            )
            lines.append(
                TestLine(
                    r,
                    feature_label(r["feature"]),
                    ratio(r),
                    t is not None,
                    None if t is None else t["discovered"],
                    None if t is None else t["breach"],
                    alert,
                )
            )
    lines.sort(
        key=lambda ln: (not bool(ln.breach), not ln.eligible, -(ln.ratio or 0), ln.label, ln.result["check"])
    )
    length = parse_member(members[0])[0]
    counts = await ctx.store.window_counts(model_id, sorted(members))
    around = await ctx.store.window_members(model_id, start - 50 * length, start + 50 * length)
    starts = sorted({parse_member(m)[1] for m in around})
    i = starts.index(start)
    return WindowView(
        model_id,
        start,
        start + length,
        [parse_member(m)[2] for m in sorted(members)],
        sum(c for c in counts if c is not None) if any(c is not None for c in counts) else None,
        baseline,
        gate,
        lines,
        cfg.persistence,
        starts[i - 1] if i > 0 else None,
        starts[i + 1] if i + 1 < len(starts) else None,
    )
