"""SVG geometry for the dashboard's charts, computed on the server (pure; no I/O).

The pages draw every chart as inline SVG from these dataclasses: nothing to load, no
script, works offline and prints. Each chart answers one question and labels its axes
with units; markers differ by shape as well as colour (the stylesheet adds patterns), so
nothing relies on red/green alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime


@dataclass(frozen=True)
class Scale:
    """A linear map from ``[lo, hi]`` to pixels ``[p0, p1]`` (``p1 < p0`` for a y axis)."""

    lo: float
    hi: float
    p0: float
    p1: float

    def __call__(self, v: float) -> float:
        span = self.hi - self.lo
        t = 0.5 if span <= 0 else (v - self.lo) / span
        return round(self.p0 + t * (self.p1 - self.p0), 1)


def _domain(values: Sequence[float], include: Sequence[float] = ()) -> tuple[float, float]:
    vals = [v for v in (*values, *include) if v is not None and math.isfinite(v)]
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    if lo == hi:
        pad = abs(lo) * 0.1 or 1.0
        return lo - pad, hi + pad
    return lo, hi


def path(points: Sequence[tuple[float, float] | None]) -> str:
    """An SVG path through ``points``; a None breaks the line (a gap).

    Examples
    --------
    >>> path([(0, 1), (2, 3), None, (4, 5)])
    'M0,1L2,3M4,5'
    """
    out, pen = [], "M"
    for p in points:
        if p is None:
            pen = "M"
            continue
        out.append(f"{pen}{p[0]:g},{p[1]:g}")
        pen = "L"
    return "".join(out)


@dataclass(frozen=True)
class Spark:
    """A sparkline: ``d`` the path, ``last`` the last point, ``lo``/``hi`` the value range."""

    d: str
    last: tuple[float, float] | None
    lo: float
    hi: float
    width: int
    height: int


def sparkline(
    values: Sequence[float | None], width: int = 120, height: int = 24, include: Sequence[float] = ()
) -> Spark:
    """A sparkline of ``values`` in order (None: no value, a gap); ``include`` widens the
    value range (e.g. to keep a floor in view).

    Examples
    --------
    >>> s = sparkline([0, 1, None, 2], width=30, height=10)
    >>> s.d, s.last
    ('M1,9L10.3,5M29,1', (29.0, 1.0))
    """
    lo, hi = _domain([v for v in values if v is not None], include)
    x = Scale(0, max(len(values) - 1, 1), 1, width - 1)
    y = Scale(lo, hi, height - 1, 1)
    pts = [None if v is None else (x(i), y(v)) for i, v in enumerate(values)]
    last = next((p for p in reversed(pts) if p is not None), None)
    return Spark(path(pts), last, lo, hi, width, height)


@dataclass(frozen=True)
class Tick:
    at: float  # pixel position
    label: str


@dataclass(frozen=True)
class Marker:
    """A point of a series: ``kind`` names its shape and class (breach, inconclusive, ok...)."""

    x: float
    y: float
    kind: str
    title: str
    href: str | None = None


@dataclass(frozen=True)
class Band:
    """A span of the x axis (an alert's breach span), with its label and link."""

    x0: float
    x1: float
    title: str
    href: str | None = None


@dataclass(frozen=True)
class LineChart:
    """An effect over time: the line, the floor, markers and alert spans."""

    width: int
    height: int
    left: int
    bottom: int
    top: int
    right: int
    d: str
    floor_y: float | None
    markers: list[Marker]
    bands: list[Band]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    x_label: str
    y_label: str
    alt_d: str = ""  # a second series (dashed), e.g. the label-free estimate beside the realized
    alt_label: str = ""


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def time_label(t: float, seconds: int) -> str:
    """A window start as the chart's axis shows it: the date for windows of a day or more,
    else date and time (UTC).

    Examples
    --------
    >>> time_label(1_362_355_200, 86_400), time_label(1_362_355_200, 300)
    ('2013-03-04', '03-04 00:00')
    """
    d = datetime.fromtimestamp(t, UTC)
    return d.strftime("%Y-%m-%d") if seconds >= 86_400 else d.strftime("%m-%d %H:%M")


def line_chart(
    xs: Sequence[float],
    ys: Sequence[float | None],
    kinds: Sequence[str],
    titles: Sequence[str],
    *,
    floor: float | None,
    window_seconds: int,
    hrefs: Sequence[str | None] | None = None,
    bands: Sequence[tuple[float, float, str, str | None]] = (),
    y_label: str = "effect",
    width: int = 720,
    height: int = 220,
    alt: Sequence[float | None] | None = None,
    alt_label: str = "",
) -> LineChart:
    """Effect ``ys`` at window starts ``xs`` (Unix s), one marker per window of kind
    ``kinds[i]``; a dashed line at ``floor``; ``bands`` (start, end, title, link) shade
    alert spans; ``alt`` a second series at the same ``xs`` (no markers), named
    ``alt_label``."""
    left, right, top, bottom = 56, 12, 10, 34
    x = Scale(min(xs, default=0), max(xs, default=1), left, width - right)
    alt_values = [v for v in alt or () if v is not None]
    lo, hi = _domain([v for v in ys if v is not None] + alt_values, [] if floor is None else [floor, 0.0])
    y = Scale(lo, hi, height - bottom, top)
    pts = [None if v is None else (x(t), y(v)) for t, v in zip(xs, ys, strict=True)]
    alt_pts = [None if v is None else (x(t), y(v)) for t, v in zip(xs, alt or [None] * len(xs), strict=True)]
    hrefs = hrefs or [None] * len(xs)
    markers = [
        Marker(p[0], p[1], k, ti, h)
        for p, k, ti, h in zip(pts, kinds, titles, hrefs, strict=True)
        if p is not None
    ]
    n_x = min(6, len(xs))
    step = max(1, math.ceil(len(xs) / max(n_x, 1)))
    x_ticks = [Tick(x(t), time_label(t, window_seconds)) for t in list(xs)[::step]]
    y_ticks = [Tick(y(lo + (hi - lo) * i / 4), _fmt(lo + (hi - lo) * i / 4)) for i in range(5)]
    spans = [Band(x(max(a, x.lo)), x(min(b, x.hi)), t, h) for a, b, t, h in bands if b >= x.lo and a <= x.hi]
    return LineChart(
        width,
        height,
        left,
        bottom,
        top,
        right,
        path(pts),
        None if floor is None else y(floor),
        markers,
        spans,
        x_ticks,
        y_ticks,
        "window start (UTC)",
        y_label,
        path(alt_pts),
        alt_label,
    )


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    w: float
    h: float
    title: str


@dataclass(frozen=True)
class DistributionChart:
    """Reference beside a window: histogram bars (reference hatched, window solid) and, for
    numbers, the two ECDFs."""

    width: int
    height: int
    left: int
    bottom: int
    top: int
    ref_bars: list[Bar]
    win_bars: list[Bar]
    ref_ecdf: str = ""
    win_ecdf: str = ""
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_label: str = ""
    y_label: str = "share of values"


def paired_bars(
    labels: Sequence[str],
    ref_share: Sequence[float],
    win_share: Sequence[float],
    x_label: str,
    width: int = 720,
    height: int = 240,
    bottom: int = 40,
) -> DistributionChart:
    """Two distributions over the same slots (bins or categories), reference beside window in
    each slot, slots equally wide; ``labels`` name the slots in the bars' tooltips."""
    left, right, top = 56, 12, 10
    n = len(labels)
    top_share = max([*ref_share, *win_share, 1e-9])
    y = Scale(0, top_share, height - bottom, top)
    slot = (width - left - right) / max(n, 1)
    ref_bars, win_bars = [], []
    for i, label in enumerate(labels):
        for bars, share, off, who in (
            (ref_bars, ref_share[i], 0.1, "reference"),
            (win_bars, win_share[i], 0.5, "window"),
        ):
            bars.append(
                Bar(
                    round(left + (i + off) * slot, 1),
                    y(share),
                    round(0.4 * slot, 1),
                    round(y(0) - y(share), 1),
                    f"{who} {label}: {share:.1%}",
                )
            )
    y_ticks = [Tick(y(top_share * i / 4), f"{top_share * i / 4:.0%}") for i in range(5)]
    return DistributionChart(
        width, height, left, bottom, top, ref_bars, win_bars, y_ticks=y_ticks, x_label=x_label
    )


def histogram_chart(
    edges: Sequence[float], ref_mass: Sequence[float], win_mass: Sequence[float], feature: str
) -> DistributionChart:
    """Overlaid histograms of two distributions over the same bins (``len(edges) - 1``
    masses each, shares summing to at most 1); bins are drawn equally wide (quantile bins
    of the reference), the axis labelled by their edges."""
    n = len(ref_mass)
    labels = [f"[{_fmt(edges[i])}, {_fmt(edges[i + 1])})" for i in range(n)]
    chart = paired_bars(labels, ref_mass, win_mass, f"{feature} (quantile bins of the reference)")
    slot = (chart.width - chart.left - 12) / max(n, 1)
    step = max(1, math.ceil(n / 8))
    ticks = [Tick(round(chart.left + i * slot, 1), _fmt(edges[i])) for i in range(0, n + 1, step)]
    return dataclasses.replace(chart, x_ticks=ticks)


def ecdf_chart(
    grid: Sequence[float],
    ref_cdf: Sequence[float],
    win_cdf: Sequence[float],
    feature: str,
    width: int = 720,
    height: int = 240,
) -> DistributionChart:
    """The two ECDFs over ``grid`` (ascending values of the feature)."""
    left, right, top, bottom = 56, 12, 10, 40
    x = Scale(grid[0] if grid else 0, grid[-1] if grid else 1, left, width - right)
    y = Scale(0, 1, height - bottom, top)

    def steps(cdf: Sequence[float]) -> str:
        return path([(x(g), y(c)) for g, c in zip(grid, cdf, strict=True)])

    lo, hi = (grid[0], grid[-1]) if grid else (0.0, 1.0)
    x_ticks = [Tick(x(lo + (hi - lo) * i / 5), _fmt(lo + (hi - lo) * i / 5)) for i in range(6)]
    y_ticks = [Tick(y(i / 4), f"{i / 4:.2f}") for i in range(5)]
    return DistributionChart(
        width,
        height,
        left,
        bottom,
        top,
        [],
        [],
        steps(ref_cdf),
        steps(win_cdf),
        x_ticks,
        y_ticks,
        feature,
        "share of values at or below",
    )


def category_chart(
    names: Sequence[str], ref_share: Sequence[float], win_share: Sequence[float]
) -> DistributionChart:
    """Top-category bars, reference beside window (shares of values)."""
    chart = paired_bars(names, ref_share, win_share, "category", height=260, bottom=60)
    slot = (chart.width - chart.left - 12) / max(len(names), 1)
    ticks = [Tick(round(chart.left + (i + 0.5) * slot, 1), name[:14]) for i, name in enumerate(names)]
    return dataclasses.replace(chart, x_ticks=ticks)


@dataclass(frozen=True)
class Lane:
    """One alert's row of an incident timeline."""

    y: float
    label: str
    href: str
    x0: float
    x1: float
    kind: str  # firing, acknowledged, resolved; muted when inhibited or silenced
    dots: list[tuple[float, str]]


@dataclass(frozen=True)
class Timeline:
    width: int
    height: int
    left: int
    lanes: list[Lane]
    x_ticks: list[Tick]
    row: int


def timeline(
    rows: Sequence[tuple[str, str, float, float, str, Sequence[float]]],
    window_seconds: int,
    width: int = 880,
    row: int = 22,
) -> Timeline:
    """Breach spans in event time, one lane per alert: (label, link, first window start, end of
    the last breach, kind, evidence window starts)."""
    left, right = 240, 48
    lo = min((r[2] for r in rows), default=0.0)
    hi = max((r[3] for r in rows), default=1.0)
    x = Scale(lo, hi, left, width - right)
    lanes = [
        Lane(
            10 + i * row,
            label,
            href,
            x(a),
            max(x(b), x(a) + 3),
            kind,
            [(x(t), time_label(t, window_seconds)) for t in ev],
        )
        for i, (label, href, a, b, kind, ev) in enumerate(rows)
    ]
    ticks = [
        Tick(x(lo + (hi - lo) * i / 5), time_label(lo + (hi - lo) * i / 5, window_seconds)) for i in range(6)
    ]
    return Timeline(width, 10 + len(rows) * row + 30, left, lanes, ticks, row)
