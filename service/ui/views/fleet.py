"""The fleet overview: every model filtered and sorted server-side, one page of rows in full.

Every model is filtered and sorted on its index, written when configurations, results and
alerts are (``Store.fleet_index``, ``AlertStore.open_index``: four commands whatever the
fleet's size), then the costlier parts (volume sparkline, the heatmap cells stored with
the latest results) are read for the page shown only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from detectors.policy.severity import highest
from service.alerting.store import OpenAlert
from service.profiles.fleet import ModelColumns
from service.ui import charts
from service.ui.views.common import DEFAULT, Ctx, feature_label

#: Health of a model, worst first: its worst open alert's severity, else how its latest window went.
HEALTH_ORDER = ("critical", "warning", "info", "insufficient traffic", "ok", "no data")
SORTS = ("model", "owner", "tier", "health", "last_window", "incidents")
HEATMAP_FEATURES = 24


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
