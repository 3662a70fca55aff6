"""The feature page: each check's effect over the recent windows, with the alerts as bands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.alerting.models import Alert
from service.ui import charts
from service.ui.views.common import Ctx, config_of, feature_label, ratio
from service.ui.views.distribution import Distribution, distribution


@dataclass(frozen=True)
class CheckChart:
    check: str
    floor: float | None
    chart: charts.LineChart
    latest: dict[str, Any] | None


@dataclass(frozen=True)
class FeatureView:
    model_id: str
    feature: str
    label: str
    source: str | None
    window_seconds: int
    windows: list[int]
    chosen: int | None
    checks: list[CheckChart]
    distribution: Distribution
    alerts: list[Alert]


async def feature_view(ctx: Ctx, model_id: str, feature: str, window: int | None) -> FeatureView | None:
    """The feature page; None when the model has no results naming ``feature``."""
    cfg = config_of((await ctx.store.model_configs([model_id]))[model_id])
    n = ctx.settings.ui_recent_windows
    windows = (await ctx.store.latest_members([model_id], n))[model_id]
    members = [m for m, _s in windows]
    history = [r or [] for r in await ctx.store.results_each([(model_id, k) for k in members])]
    if not any(r["feature"] == feature for results in history for r in results):
        ref = await ctx.store.reference(model_id)
        if ref is None or (feature not in ref.features and feature not in ref.vectors):
            return None
    alerts = [a for a in await ctx.alerts.alerts(model_id, 0, 200) if a.feature == feature]
    starts = [s for _m, s in windows]
    checks = sorted({r["check"] for results in history for r in results if r["feature"] == feature})
    out = []
    for check in checks:
        rows = [
            next((r for r in results if r["feature"] == feature and r["check"] == check), None)
            for results in history
        ]
        floor = next((r["floor"] for r in reversed(rows) if r is not None and r.get("floor")), None)
        ys = [None if r is None or r.get("effect_size") is None else abs(r["effect_size"]) for r in rows]
        kinds = [_kind(r) for r in rows]
        titles = [
            f"{charts.time_label(s, cfg.window_seconds)}: {_kind(r)}"
            + ("" if r is None or r.get("effect_size") is None else f", effect {abs(r['effect_size']):.3g}")
            + ("" if r is None or r.get("p_value") is None else f", p {r['p_value']:.2g}")
            for s, r in zip(starts, rows, strict=True)
        ]
        bands = [
            (
                a.window_start,
                (a.resolved_window_start or a.last_window_start) + cfg.window_seconds,
                f"alert {a.check} {a.state} ({a.severity})",
                f"/ui/incidents/{a.incident_id}" if a.incident_id else None,
            )
            for a in alerts
            if a.check == check
        ]
        chart = charts.line_chart(
            starts,
            ys,
            kinds,
            titles,
            floor=floor,
            window_seconds=cfg.window_seconds,
            hrefs=[f"/ui/models/{model_id}/windows/{s}" for s in starts],
            bands=bands,
            y_label=f"{check} effect",
            width=600,
            height=170,
        )
        out.append(CheckChart(check, floor, chart, next((r for r in reversed(rows) if r is not None), None)))
    chosen = window if window is not None else (starts[-1] if starts else None)
    dist = await distribution(ctx, model_id, feature, chosen)
    return FeatureView(
        model_id,
        feature,
        feature_label(feature),
        cfg.source_of(feature),
        cfg.window_seconds,
        starts,
        chosen,
        out,
        dist,
        alerts,
    )


def _kind(r: dict[str, Any] | None) -> str:
    if r is None:
        return "none"
    if r["status"] == "drift":
        return "breach" if (ratio(r) or 0) >= 1 else "drift"
    return r["status"]
