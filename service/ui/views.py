"""What each dashboard page shows, read from profiles, results and the alert store.

Nothing here reads raw events: window profiles (``service.profiles.store``), the detector's stored
test results per window, alerts and incidents (``service.alerting.store``), the FDR gate's
counters (``service.alerting.fdr``) and the notification outbox (``service.paging.outbox``). Each page
builds a small frozen dataclass the template renders.

The fleet overview filters and sorts every model server-side on its index, written when
configurations, results and alerts are (``Store.fleet_index``, ``AlertStore.open_index``:
four commands whatever the fleet's size), then reads the costlier parts (volume sparkline,
the heatmap cells stored with the latest results) for the page shown only.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from detectors.fdr.epoch import EpochSpending
from detectors.multivariate import MULTIVARIATE_FEATURE, aligned
from detectors.multivariate.correlation import fisher_z
from detectors.policy.severity import highest
from service.alerting.fdr import epochs, slot_use, spending
from service.alerting.store import AlertStore, OpenAlert
from service.paging.outbox import Outbox
from service.profiles.fleet import ModelColumns
from service.profiles.keys import parse_member
from service.profiles.store import Store
from service.registry import ModelConfig
from service.settings import Settings
from service.stored import Unreadable
from service.ui import charts
from sketches.comoments import CoMoments
from sketches.profile import FeatureProfile, WindowProfile

#: Health of a model, worst first: its worst open alert's severity, else how its latest window went.
HEALTH_ORDER = ("critical", "warning", "info", "insufficient traffic", "ok", "no data")
SORTS = ("model", "owner", "tier", "health", "last_window", "incidents")
HEATMAP_FEATURES = 24
HIST_BINS = 20
TOP_CATEGORIES = 10
OUTPUTS = {"__score__": "score", "__prediction__": "prediction",
           MULTIVARIATE_FEATURE: "numeric features jointly", "": "window"}
QUALITY_CHECKS = ("null_rate", "type_mismatch", "nonfinite", "out_of_range", "cardinality")


@dataclass(frozen=True)
class Ctx:
    store: Store
    alerts: AlertStore
    settings: Settings


def ratio(r: dict[str, Any]) -> float | None:
    """|effect| / floor of a stored result (None when it has no effect or no floor)."""
    e, f = r.get("effect_size"), r.get("floor") or 0.0
    if e is None or f <= 0:
        return None
    return abs(e) / f


def feature_label(name: str) -> str:
    """How a results' feature name reads: model outputs and window-level tests by role."""
    return OUTPUTS.get(name, name)


DEFAULT = ModelConfig()


def _config(raw: ModelConfig | Unreadable | None) -> ModelConfig:
    """The model's configuration; the defaults when it has none or its stored one does not
    parse (``Store.model_configs`` logs and counts that)."""
    return raw if isinstance(raw, ModelConfig) else DEFAULT


# -- fleet overview ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FleetQuery:
    owner: str | None = None
    tier: int | None = None
    source: str | None = None
    health: str | None = None
    q: str | None = None
    sort: str = "health"
    desc: bool = False
    page: int = 1


@dataclass(frozen=True)
class Cell:
    feature: str
    ratio: float | None
    status: str  # breach, drift, inconclusive, ok

    @property
    def level(self) -> int:
        """Shade 0..5: the ratio in steps of 0.4, 5 from a ratio of 2 (twice the floor) on."""
        return 0 if self.ratio is None else min(5, math.ceil(self.ratio / 0.4))

    @property
    def title(self) -> str:
        shown = "n/a" if self.ratio is None else format(self.ratio, ".2f")
        return f"{feature_label(self.feature)}: largest effect/floor {shown}, {self.status}"


@dataclass(slots=True)
class FleetRow:
    """One model's row; ``spark``, ``counts`` and ``cells`` are read for the rows shown only
    (a row of every model is built per request: nothing else is allocated per row)."""

    model_id: str
    owner: str | None
    tier: int
    sources: tuple[str, ...]
    health: str
    window_seconds: int
    last_window: int | None
    last_member: str | None
    open_alerts: int
    incidents: Sequence[str]
    spark: charts.Spark | None = None
    counts: Sequence[int | None] = ()
    cells: Mapping[str, Cell] | None = None  # set by _fill_rows for the rows shown


@dataclass(frozen=True)
class FleetPage:
    rows: list[FleetRow]
    total: int
    matching: int
    page: int
    pages: int
    owners: list[str]
    sources: list[str]
    heat_features: list[str]
    health_counts: dict[str, int]
    open_incidents: int


def _health_key(h: str) -> int:
    return HEALTH_ORDER.index(h)


DEFAULT_COLUMNS = ModelColumns.of(DEFAULT)


async def fleet(ctx: Ctx, q: FleetQuery) -> FleetPage:
    """The fleet overview: every model filtered and sorted, one page of rows in full.

    Every model's row comes from the fleet index (``Store.fleet_index``: columns of its
    configuration, latest window with results) and the open alerts
    (``AlertStore.open_index``), four commands in two round trips whatever the fleet's
    size; the page's rows then read their volume counts and heatmap cells."""
    index = await ctx.store.fleet_index()
    by_model: dict[str, list[OpenAlert]] = {}
    for a in (await ctx.alerts.open_index()).values():
        by_model.setdefault(a.model_id, []).append(a)
    rows = []
    for m in index.models:
        cols = index.columns.get(m, DEFAULT_COLUMNS)
        alerts = by_model.get(m, [])
        last = index.latest.get(m)
        if alerts:
            health = highest([a.severity for a in alerts])
            incidents: Sequence[str] = sorted({a.incident_id for a in alerts if a.incident_id})
        else:
            health = "no data" if last is None else last.status
            incidents = ()
        rows.append(
            FleetRow(
                m,
                cols.owner,
                cols.tier,
                cols.sources,
                health,
                cols.window_seconds,
                None if last is None else last.start,
                None if last is None else last.member,
                len(alerts),
                incidents,
            )
        )
    owners = sorted({r.owner for r in rows if r.owner})
    sources = sorted({s for r in rows for s in r.sources})
    health_counts = Counter(r.health for r in rows)
    shown = [
        r
        for r in rows
        if (q.owner is None or r.owner == q.owner)
        and (q.tier is None or r.tier == q.tier)
        and (q.source is None or q.source in r.sources)
        and (q.health is None or r.health == q.health)
        and (not q.q or q.q.lower() in r.model_id.lower())
    ]
    key = {
        "model": lambda r: r.model_id,
        "owner": lambda r: (r.owner or "\uffff", r.model_id),
        "tier": lambda r: (r.tier, r.model_id),
        "health": lambda r: (_health_key(r.health), -r.open_alerts, r.model_id),
        "last_window": lambda r: (-(r.last_window or -math.inf), r.model_id),
        "incidents": lambda r: (-len(r.incidents), r.model_id),
    }[q.sort]
    shown.sort(key=key, reverse=q.desc)
    size = ctx.settings.ui_page_size
    pages = max(1, math.ceil(len(shown) / size))
    page = min(max(q.page, 1), pages)
    rows_shown = shown[(page - 1) * size : page * size]
    await _fill_rows(ctx, rows_shown)
    ratios: dict[str, float] = {}
    for r in rows_shown:
        for f, c in (r.cells or {}).items():
            ratios[f] = max(ratios.get(f, 0.0), c.ratio or 0.0)
    heat = sorted(ratios, key=lambda f: (-ratios[f], f))[:HEATMAP_FEATURES]
    return FleetPage(
        rows_shown,
        len(rows),
        len(shown),
        page,
        pages,
        owners,
        sources,
        sorted(heat),
        dict(health_counts),
        len({i for r in rows for i in r.incidents}),
    )


async def _fill_rows(ctx: Ctx, rows: list[FleetRow]) -> None:
    """Volume sparkline and heatmap cells of one page's rows, in two pipelined round trips."""
    n = ctx.settings.ui_recent_windows
    recent, heat = await ctx.store.recent_and_heat(
        [(r.model_id, r.last_member) for r in rows], n
    )
    members = {m: [k for k, _s in ws] for m, ws in recent.items()}
    counts = await ctx.store.window_counts_many(members)
    for row in rows:
        row.counts = counts[row.model_id]
        if members[row.model_id]:
            row.spark = charts.sparkline([float(c) if c is not None else None for c in row.counts])
        row.cells = {f: Cell(f, ratio, state) for f, (ratio, state) in heat[row.model_id].items()}


# -- model page -----------------------------------------------------------------------------


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
    alerts: list[dict[str, Any]]
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
    cfg = _config((await ctx.store.model_configs([model_id]))[model_id])
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
        sorted({a["incident_id"] for a in alerts if a.get("incident_id")}),
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


# -- feature page ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckChart:
    check: str
    floor: float | None
    chart: charts.LineChart
    latest: dict[str, Any] | None


@dataclass(frozen=True)
class Distribution:
    kind: str  # numeric, categorical, correlation, none
    note: str
    hist: charts.DistributionChart | None = None
    ecdf: charts.DistributionChart | None = None
    bars: charts.DistributionChart | None = None
    table: list[tuple[str, float, float, str]] = field(default_factory=list)
    ref_count: int = 0
    win_count: int = 0


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
    alerts: list[dict[str, Any]]


async def feature_view(ctx: Ctx, model_id: str, feature: str, window: int | None) -> FeatureView | None:
    """The feature page; None when the model has no results naming ``feature``."""
    cfg = _config((await ctx.store.model_configs([model_id]))[model_id])
    n = ctx.settings.ui_recent_windows
    windows = (await ctx.store.latest_members([model_id], n))[model_id]
    members = [m for m, _s in windows]
    history = [r or [] for r in await ctx.store.results_each([(model_id, k) for k in members])]
    if not any(r["feature"] == feature for results in history for r in results):
        ref = await ctx.store.reference(model_id)
        if ref is None or (feature not in ref.features and feature not in ref.vectors):
            return None
    alerts = [a for a in await ctx.alerts.alerts(model_id, 0, 200) if a["feature"] == feature]
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
                a["window_start"],
                (a.get("resolved_window_start") or a["last_window_start"]) + cfg.window_seconds,
                f"alert {a['check']} {a['state']} ({a['severity']})",
                f"/ui/incidents/{a['incident_id']}" if a.get("incident_id") else None,
            )
            for a in alerts
            if a["check"] == check
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


async def window_profile(ctx: Ctx, model_id: str, start: int) -> WindowProfile | None:
    """The window starting at ``start``, its versions merged."""
    members = await ctx.store.window_members(model_id, start, start)
    parts = await ctx.store.window_profiles(model_id, members)
    if not parts:
        return None
    merged = parts[0]
    for p in parts[1:]:
        merged.merge(p)
    return merged


def _feature_of(p: WindowProfile, feature: str) -> FeatureProfile | None:
    if feature == "__score__":
        return None
    return p.features.get(feature)


async def distribution(ctx: Ctx, model_id: str, feature: str, start: int | None) -> Distribution:
    """The reference distribution of ``feature`` beside the window's, from the two profiles."""
    ref = await ctx.store.reference(model_id)
    if ref is None:
        return Distribution(
            "none",
            "This model has no reference profile: its windows are compared with a "
            "seasonal or trailing baseline, so there is no reference to draw.",
        )
    if start is None:
        return Distribution("none", "No closed window yet.")
    win = await window_profile(ctx, model_id, start)
    if win is None:
        return Distribution("none", "This window's profile has expired (retention).")
    if feature == "__score__":
        rs, ws = ref.score, win.score
        return _numeric(rs, ws, "score", ref.count, win.count)
    if feature == MULTIVARIATE_FEATURE:
        return _correlations(ref.comoments, win.comoments)
    rv, wv = ref.vectors.get(feature), win.vectors.get(feature)
    if rv is not None and wv is not None:  # a vector feature: the distribution of its norms
        return _numeric(rv.norms, wv.norms, f"{feature} (norm)", rv.count + rv.nulls, wv.count + wv.nulls,
                        null_note=f"{feature_label(feature)} is a vector feature of {rv.dim} dimensions: "
                        "the distribution drawn is that of its norms.")
    rf, wf = ref.features.get(feature), win.features.get(feature)
    if rf is None or wf is None:
        return Distribution(
            "none",
            f"{'The reference' if rf is None else 'This window'} has no values of {feature_label(feature)}.",
        )
    if rf.kind == "numeric" and wf.kind == "numeric":
        return _numeric(
            rf.numeric,
            wf.numeric,
            feature,
            rf.total,
            wf.total,
            null_note=f"Null rate: reference {rf.null_count / rf.total if rf.total else 0:.1%}, "
            f"window {wf.null_count / wf.total if wf.total else 0:.1%}.",
        )
    if rf.kind == "categorical" and wf.kind == "categorical":
        return _categorical(rf, wf)
    return Distribution(
        "none", f"{feature_label(feature)} is {rf.kind} in the reference and {wf.kind} in the window."
    )


def _numeric(
    rs: Any, ws: Any, feature: str, ref_total: int, win_total: int, null_note: str = ""
) -> Distribution:
    if rs.count == 0 or ws.count == 0:
        return Distribution(
            "none",
            f"No non-null values in the {'reference' if rs.count == 0 else 'window'}. " + null_note,
            ref_count=ref_total,
            win_count=win_total,
        )
    qs = np.linspace(0, 1, HIST_BINS + 1)
    edges = np.unique([rs.quantile(float(q)) for q in qs])
    lo, hi = min(edges[0], ws.min), max(edges[-1], ws.max)
    edges = np.unique(np.concatenate([[lo], edges[1:-1], [hi]])) if len(edges) > 1 else np.array([lo, hi])
    if len(edges) < 2:
        edges = np.array([lo - 0.5, hi + 0.5])
    rc, wc = rs.cdf_many(edges), ws.cdf_many(edges)
    rc[0] = wc[0] = 0.0
    rc[-1] = wc[-1] = 1.0
    hist = charts.histogram_chart(edges.tolist(), np.diff(rc).tolist(), np.diff(wc).tolist(), feature)
    grid = np.linspace(lo, hi, 120)
    ecdf = charts.ecdf_chart(grid.tolist(), rs.cdf_many(grid).tolist(), ws.cdf_many(grid).tolist(), feature)
    note = (
        f"Reference {rs.count:,} values, window {ws.count:,}; bins are the reference's "
        f"{len(edges) - 1} quantile bins{' (exact counts)' if rs.is_exact and ws.is_exact else ''}. "
        + null_note
    )
    return Distribution("numeric", note, hist=hist, ecdf=ecdf, ref_count=ref_total, win_count=win_total)


def _correlations(rc: CoMoments | None, wc: CoMoments | None) -> Distribution:
    """The pairs of numeric features whose correlation moved most (Fisher z), reference beside
    window: what the multivariate checks read."""
    if rc is None or wc is None or rc.n < 2 or wc.n < 2:
        side = "reference" if rc is None or rc.n < 2 else "window"
        return Distribution("none", f"The {side} has too few complete rows of the numeric features "
                                    "(or was written before profiles kept their co-moments).")
    a = aligned(rc, wc)
    r_ref, r_win = a.reference.correlation(), a.current.correlation()
    pairs = [(i, j) for i in range(len(a.names)) for j in range(i + 1, len(a.names))]
    pairs.sort(key=lambda ij: -abs(fisher_z(r_win[ij]) - fisher_z(r_ref[ij])))
    table = [(f"{a.names[i]} × {a.names[j]}", float(r_ref[i, j]), float(r_win[i, j]),
              f"change of Fisher z {float(fisher_z(r_win[i, j]) - fisher_z(r_ref[i, j])):+.2f}")
             for i, j in pairs[:TOP_CATEGORIES]]
    return Distribution(
        "correlation",
        f"Correlations of the numeric features over complete rows ({a.reference.n:,} in the "
        f"reference, {a.current.n:,} in the window), the {len(table)} pairs that moved most first.",
        table=table, ref_count=a.reference.n, win_count=a.current.n)


def _categorical(rf: FeatureProfile, wf: FeatureProfile) -> Distribution:
    rc, wc = rf.categorical, wf.categorical
    rn, wn = max(rc.count, 1), max(wc.count, 1)
    top = list(rc.frequencies(TOP_CATEGORIES))
    wtop = wc.frequencies(TOP_CATEGORIES)
    new = [c for c in wtop if rc.estimate(c) == 0]
    names, rshare, wshare, table = [], [], [], []
    for c in top:
        r, w = rc.estimate(c) / rn, wc.estimate(c) / wn
        names.append(c)
        rshare.append(r)
        wshare.append(w)
        table.append((c, r, w, "top in reference"))
    for c in new:
        w = wc.estimate(c) / wn
        names.append(f"{c} (new)")
        rshare.append(0.0)
        wshare.append(w)
        table.append((c, 0.0, w, "new: not in the reference"))
    other_r = max(0.0, 1 - sum(rshare))
    other_w = max(0.0, 1 - sum(wshare))
    names.append("other")
    rshare.append(other_r)
    wshare.append(other_w)
    table.append(("other", other_r, other_w, "every other category"))
    note = (
        f"Reference {rc.count:,} values ({rc.distinct:,.0f} distinct), window {wc.count:,} "
        f"({wc.distinct:,.0f} distinct); the reference's top {len(top)} categories, then categories "
        f"new in the window, then the rest as other."
    )
    return Distribution(
        "categorical",
        note,
        bars=charts.category_chart(names, rshare, wshare),
        table=table,
        ref_count=rf.total,
        win_count=wf.total,
    )


# -- "why did this page?" -----------------------------------------------------------------------


@dataclass(frozen=True)
class TestLine:
    result: dict[str, Any]
    label: str
    ratio: float | None
    eligible: bool
    discovered: bool | None
    breach: bool | None
    alert: dict[str, Any] | None


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
    cfg = _config((await ctx.store.model_configs([model_id]))[model_id])
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
                    if a["feature"] == r["feature"]
                    and a["check"] == r["check"]
                    and a["window_start"]
                    <= start
                    <= (a.get("resolved_window_start") or a["last_window_start"])
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


# -- incident page --------------------------------------------------------------------------


@dataclass(frozen=True)
class IncidentView:
    incident: dict[str, Any]
    alerts: list[dict[str, Any]]
    timeline: charts.Timeline
    notifications: list[dict[str, Any]]
    silence_matchers: list[dict[str, Any]]


def _alternation(values: Sequence[str]) -> str:
    import re

    return "|".join(re.escape(v) for v in sorted(set(values)))


def silence_matchers(incident: dict[str, Any]) -> list[dict[str, Any]]:
    """Matchers that silence exactly this incident's scope: its models and its features
    (anchored regular expressions when there are several)."""
    out = []
    for name, values in (("model", incident["models"]), ("feature", [f for f in incident["features"] if f])):
        if len(values) == 1:
            out.append({"name": name, "value": values[0], "regex": False})
        elif values:
            out.append({"name": name, "value": _alternation(values), "regex": True})
    return out


async def incident_view(ctx: Ctx, summary: dict[str, Any]) -> IncidentView:
    """The incident page from its summary (``service.api.incidents.summarize``)."""
    configs = await ctx.store.model_configs(summary["models"])
    rows = []
    alerts = sorted(
        summary["alerts"],
        key=lambda a: (a["state"] == "resolved", a["window_start"], a["model_id"], a["feature"], a["check"]),
    )
    for a in alerts:
        length = _config(configs.get(a["model_id"])).window_seconds
        end = (a.get("resolved_window_start") or a["last_window_start"]) + length
        kind = a["state"] + (" muted" if a.get("inhibited_by") or a.get("silenced_by") else "")
        rows.append(
            (
                f"{a['model_id']} · {feature_label(a['feature'])} · {a['check']}",
                f"/ui/models/{a['model_id']}/features/{a['feature']}"
                if a["feature"]
                else f"/ui/models/{a['model_id']}",
                a["window_start"],
                end,
                kind,
                [e["window_start"] for e in a.get("evidence", [])],
            )
        )
    seconds = min((_config(c).window_seconds for c in configs.values()), default=300)
    log = [i.view() for i in await Outbox(ctx.store.r).for_incident(summary["id"])]
    return IncidentView(summary, alerts, charts.timeline(rows, seconds), log, silence_matchers(summary))


# -- FDR gate -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotLine:
    """A run of consecutive slots with the same counts (a window longer than a slot is
    granted the same in each slot it spans)."""

    slot: int
    last_slot: int
    start: int
    submitted: int
    granted: int
    capacity: int
    discoveries: int
    reward: int
    spent: float
    wealth: float
    level_one: float


@dataclass(frozen=True)
class FdrView:
    params: EpochSpending
    epoch: int | None
    epochs: list[int]
    slots: list[SlotLine]


async def fdr_view(ctx: Ctx, epoch: int | None) -> FdrView:
    """The fleet FDR gate of one epoch (default: the latest kept): per slot, tests submitted
    and granted against the capacity, discoveries, the reward earlier discoveries give, alpha spent and
    the level a one-test window would face."""
    params = spending(ctx.settings)
    kept = await epochs(ctx.store.r)
    if epoch is None and kept:
        epoch = kept[-1]
    lines = []
    if epoch is not None:
        uses = await slot_use(ctx.store.r, epoch)
        disc = {u.slot: u.discoveries for u in uses}
        for u in uses:
            reward = sum(d for s, d in disc.items() if s <= u.slot - params.reward_lag_slots)
            capacity = max(u.capacity, 1)
            spent = params.alpha / params.slots * min(u.granted, capacity) / capacity
            prev = lines[-1] if lines else None
            if (
                prev is not None
                and prev.last_slot == u.slot - 1
                and (prev.submitted, prev.granted, prev.capacity, prev.discoveries, prev.reward)
                == (u.submitted, u.granted, u.capacity, u.discoveries, reward)
            ):
                lines[-1] = dataclasses.replace(
                    prev, last_slot=u.slot, spent=prev.spent + spent,
                    wealth=params.wealth(u.slot, u.granted, capacity)
                )
                continue
            lines.append(
                SlotLine(
                    u.slot,
                    u.slot,
                    epoch * params.epoch_seconds + u.slot * params.slot_seconds,
                    u.submitted,
                    u.granted,
                    u.capacity,
                    u.discoveries,
                    reward,
                    spent,
                    params.wealth(u.slot, u.granted, capacity),
                    params.level(1, 1, reward, capacity),
                )
            )
    return FdrView(params, epoch, kept, lines)
