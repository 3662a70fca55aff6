"""A feature's reference distribution beside a window's, drawn from the two profiles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from detectors.multivariate import MULTIVARIATE_FEATURE, aligned
from detectors.multivariate.correlation import fisher_z
from service.ui import charts
from service.ui.views.common import Ctx, feature_label
from sketches.comoments import CoMoments
from sketches.profile import FeatureProfile, WindowProfile

HIST_BINS = 20
TOP_CATEGORIES = 10


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
