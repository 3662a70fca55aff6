"""The model page: per feature status and effect history, outputs, volume, alerts, performance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.alerting.models import Alert
from service.registry import ModelConfig
from service.ui import charts
from service.ui.views.common import OUTPUTS, Ctx, config_of, feature_label, ratio

QUALITY_CHECKS = ("null_rate", "type_mismatch", "nonfinite", "out_of_range", "cardinality")


@dataclass(frozen=True)
class FeatureRow:
    feature: str
    label: str
    check: str
    status: str
    effect: float | None
    floor: float | None
    p_value: float | None
    ratio: float | None
    spark: charts.Spark
    quality: list[dict[str, Any]]
    source: str | None


@dataclass(frozen=True)
class ModelView:
    model_id: str
    config: ModelConfig
    detector_config: str | None
    has_reference: bool
    baseline: str | None
    windows: list[tuple[str, int]]
    counts: list[int | None]
    volume_chart: charts.LineChart | None
    expected: list[float | None]
    features: list[FeatureRow]
    outputs: list[FeatureRow]
    alerts: list[Alert]
    incidents: list[str]
    performance: dict[str, Any] | None
    perf_chart: charts.LineChart | None


Indexed = dict[tuple[str, str], dict[str, Any]]


def _row(feature: str, history: list[Indexed], last: list[dict[str, Any]], source: str | None) -> FeatureRow:
    """A feature's row: its check with the largest effect/floor in the latest evaluated window
    (``last``), and that check's effect over the recent windows (``history``: each window's
    results by feature and check)."""
    latest = [r for r in last if r["feature"] == feature]
    main = max(latest, key=lambda r: (ratio(r) or -1.0, r["check"]))
    series = []
    for results in history:
        got = results.get((feature, main["check"]))
        series.append(None if got is None or got.get("effect_size") is None else abs(got["effect_size"]))
    floor = main.get("floor")
    spark = charts.sparkline(series, include=[floor] if floor else [])
    quality = [r for r in latest if r["check"] in QUALITY_CHECKS]
    return FeatureRow(
        feature,
        feature_label(feature),
        main["check"],
        main["status"],
        main.get("effect_size"),
        floor,
        main.get("p_value"),
        ratio(main),
        spark,
        quality,
        source,
    )


async def model_view(ctx: Ctx, model_id: str, performance: dict[str, Any] | None) -> ModelView:
    """The model page: per feature status and effect history, outputs, volume, alerts."""
    cfg = config_of((await ctx.store.model_configs([model_id]))[model_id])
    n = ctx.settings.ui_recent_windows
    windows = (await ctx.store.latest_members([model_id], n))[model_id]
    members = [m for m, _s in windows]
    history = [r or [] for r in await ctx.store.results_each([(model_id, k) for k in members])]
    counts = await ctx.store.window_counts(model_id, members)
    features, outputs = [], []
    last = next((h for h in reversed(history) if h), [])  # the latest window with results
    indexed = [{(r["feature"], r["check"]): r for r in results} for results in history]
    for f in sorted({r["feature"] for r in last}):
        row = _row(f, indexed, last, cfg.source_of(f))
        (outputs if f in OUTPUTS else features).append(row)
    features.sort(key=lambda r: (-(r.ratio or 0.0), r.feature))
    expected = []
    for results in history:
        vol = next((r for r in results if r["check"] == "volume" and r.get("effect_size") is not None), None)
        expected.append(
            None if vol is None or vol["effect_size"] <= -1 else vol["n_current"] / (1 + vol["effect_size"])
        )
    volume_chart = None
    if windows:
        xs = [s for _m, s in windows]
        kinds = ["ok" if c is not None else "none" for c in counts]
        titles = [
            f"{charts.time_label(s, cfg.window_seconds)}: {c if c is not None else 'expired'} records"
            + (f", expected {e:.0f}" if e is not None else "")
            for s, c, e in zip(xs, counts, expected, strict=True)
        ]
        volume_chart = charts.line_chart(
            xs,
            [float(c) if c is not None else None for c in counts],
            kinds,
            titles,
            floor=None,
            window_seconds=cfg.window_seconds,
            hrefs=[f"/ui/models/{model_id}/windows/{s}" for s in xs],
            y_label="records per window",
        )
    alerts = await ctx.alerts.alerts(model_id, 0, 100)
    baseline = next((r.get("baseline") for r in last if r.get("baseline")), None)
    perf_chart = _performance_chart(performance, cfg.window_seconds, model_id) if performance else None
    return ModelView(
        model_id,
        cfg,
        await ctx.store.detector_config(model_id),
        await ctx.store.reference(model_id) is not None,
        baseline,
        windows,
        counts,
        volume_chart,
        expected,
        features,
        outputs,
        alerts,
        sorted({a.incident_id for a in alerts if a.incident_id}),
        performance,
        perf_chart,
    )


def _performance_chart(perf: dict[str, Any], seconds: int, model_id: str) -> charts.LineChart | None:
    """Realized metric per cohort (markers: mature solid, immature hollow: never judged) over
    time, beside the label-free estimate of the same metric (dashed; binary CBPE ROC AUC,
    multiclass expected accuracy; none for regression)."""
    cohorts = perf.get("cohorts") or []
    if not cohorts:
        return None
    metric = {"binary": "roc_auc", "multiclass": "accuracy", "regression": "mae"}.get(perf["task"], "roc_auc")
    xs = [c["window_start"] for c in cohorts]
    ys = [(c.get("realized") or {}).get(metric) for c in cohorts]
    estimated = [(c.get("estimated") or {}).get(metric) for c in cohorts]
    kinds = ["ok" if c["maturity"]["mature"] else "immature" for c in cohorts]
    titles = [
        f"{charts.time_label(c['window_start'], seconds)}: {metric} "
        f"{'n/a' if y is None else f'{y:.3f}'}, labeled {c['maturity']['labeled_fraction']:.0%}"
        f" ({'mature' if c['maturity']['mature'] else 'immature: not judged'})"
        for c, y in zip(cohorts, ys, strict=True)
    ]
    return charts.line_chart(
        xs, ys, kinds, titles, floor=None, window_seconds=seconds, y_label=metric,
        alt=estimated if any(v is not None for v in estimated) else None,
        alt_label=f"label-free estimate of {metric}",
    )
