"""What ``fleetwatch simulate`` says: the scenario it runs, the scorecard against its targets
as a table beside the naive policy's, the alerts that map to no incident, and each missed
incident with the strongest evidence the stored results held for it. Pure; no I/O."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from service.settings import Settings
from service.sim.incidents import (
    BROKEN_FEATURE,
    CATEGORY_FLOOD,
    LINEAGE_BREAK,
    UNIT_CHANGE,
    VOLUME_DROP,
    Incident,
    Scenario,
)
from service.sim.naive import NAIVE_PSI
from service.sim.score import DECIDED, GROUPS, SHIFT_LOW, GroupScore, Scorecard
from service.sim.streams import WINDOW_SECONDS, SimOptions

#: Groups with recall and MTTD targets: every incident kind (covariate shifts from the
#: target PSI on).
TARGET_GROUPS = tuple(g for g in GROUPS if g != SHIFT_LOW)
TARGET_RECALL = 0.9
TARGET_MTTD_WINDOWS = 2.0
#: Kinds whose evidence is overwhelming from their first window: paged within one window.
FAST_MTTD_WINDOWS = 1.0
FAST_GROUPS = frozenset({BROKEN_FEATURE, UNIT_CHANGE, CATEGORY_FLOOD})
TARGET_PRECISION = 0.95
TARGET_FALSE_PAGES = 1.0


def strongest_evidence(incident: Incident,
                       windows: Iterable[tuple[str, float, float, Sequence[Mapping[str, Any]]]],
                       alerting: Callable[[str, str], bool]) -> dict[str, Any] | None:
    """The stored test result that came closest to alerting on an incident: among the
    decided results of alerting checks on (model, feature) pairs the incident explains, in
    windows overlapping its span, the smallest p-value (ties: the largest effect over
    floor); and how many such results were ``inconclusive`` (significant only if the
    sketches were exact: never eligible to alert). Explains a miss: was the signal there,
    and how far from the gate?

    Parameters
    ----------
    windows : iterable of (model_id, window_start, window_seconds, results)
        Stored per-window results (dicts with feature, check, status, effect_size,
        p_value, floor).
    alerting : callable
        ``(feature, check) -> bool``: may the check alert for the feature?

    Examples
    --------

    >>> i = Incident("u", UNIT_CHANGE, 3600, 7200, ("m",), ("s.x",), 1000.0)
    >>> rs = [{"feature": "s.x", "check": "psi", "status": "drift", "effect_size": 2.0,
    ...        "p_value": 1e-9, "floor": 0.1},
    ...       {"feature": "s.x", "check": "ks", "status": "drift", "effect_size": 0.9,
    ...        "p_value": 0.0, "floor": 0.1}]
    >>> e = strongest_evidence(i, [("m", 3600, 3600, rs)], lambda f, c: c == "psi")
    >>> e["p_value"], e["inconclusive"]
    (1e-09, 0)
    """
    best: dict[str, Any] | None = None
    inconclusive = 0
    for model_id, start, length, results in windows:
        if not incident.overlaps(start, start + length):
            continue
        for r in results:
            if not incident.explains(model_id, r["feature"]) or not alerting(r["feature"], r["check"]):
                continue
            if r.get("status") == "inconclusive":
                inconclusive += 1
            if r.get("status") not in DECIDED or r.get("p_value") is None:
                continue
            over_floor = abs(float(r["effect_size"] or 0.0)) / max(float(r.get("floor") or 0.0), 1e-12)
            key = (float(r["p_value"]), -over_floor)
            if best is None or key < best["_key"]:
                best = {"_key": key, "model_id": model_id, "window_start": start,
                        "feature": r["feature"], "check": r["check"], "effect_size": r["effect_size"],
                        "p_value": r["p_value"], "floor": r.get("floor")}
    if best is None:
        return {"inconclusive": inconclusive} if inconclusive else None
    best.pop("_key")
    best["inconclusive"] = inconclusive
    return best


@dataclass(frozen=True)
class Target:
    """One target of the default scenario and whether the scorecard meets it (None: the
    scenario injected nothing to measure it on)."""

    name: str
    goal: str
    value: str
    met: bool | None


def _fmt(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def targets(card: Scorecard) -> list[Target]:
    """The targets: recall >= 0.9 and mean MTTD <= 2 windows for every incident kind
    (covariate shifts with PSI >= 0.25), <= 1 window for broken features, unit changes
    and category floods, one incident per lineage break, alert precision >= 0.95, <= 1
    false page per 1,000 control model-days. A kind that was not injected has nothing to measure (None); a
    kind injected but never detected misses its MTTD target too.

    Examples
    --------
    >>> from service.sim.score import scorecard
    >>> card = scorecard("fw", [], [], ["a"], 0, 86_400, 3600)
    >>> [t.met for t in targets(card)][-3:]
    [None, None, True]
    """
    out = []
    for g in TARGET_GROUPS:
        s = card.groups.get(g)
        goal = FAST_MTTD_WINDOWS if g in FAST_GROUPS else TARGET_MTTD_WINDOWS
        if s is None or not s.injected:
            out.append(Target(f"recall {g}", f">= {TARGET_RECALL}", "none injected", None))
            out.append(Target(f"MTTD {g}", f"<= {goal:g} windows (mean)", "none injected", None))
            continue
        out.append(Target(f"recall {g}", f">= {TARGET_RECALL}", _fmt(s.recall),
                          s.recall is not None and s.recall >= TARGET_RECALL))
        mttd = s.mttd_mean_windows
        out.append(Target(f"MTTD {g}", f"<= {goal:g} windows (mean)",
                          _fmt(mttd), mttd is not None and mttd <= goal))
    lineage = [r for r in card.incidents if r.kind == LINEAGE_BREAK]
    per = [r.fleet_incidents for r in lineage]
    out.append(Target("incidents per lineage break", "== 1 each (all detected)",
                      ", ".join(map(str, per)) or "none injected",
                      all(r.detected and r.fleet_incidents == 1 for r in lineage) if lineage else None))
    out.append(Target("alert precision", f">= {TARGET_PRECISION}", _fmt(card.alert_precision, 3),
                      None if card.alert_precision is None else card.alert_precision >= TARGET_PRECISION))
    fp = card.false_pages_per_1000_model_days
    out.append(Target("false pages per 1,000 control model-days", f"<= {TARGET_FALSE_PAGES:g}",
                      _fmt(fp), None if fp is None else fp <= TARGET_FALSE_PAGES))
    return out


_W = 38  # width of one policy's columns


def _cell(s: GroupScore | None) -> str:
    if s is None or not s.injected:
        return f"{'-':>8} {'-':>10} {'-':>8} {'-':>9}"
    mttd = "-" if s.mttd_mean_minutes is None else f"{s.mttd_mean_minutes:.0f}"
    med = "-" if s.mttd_median_minutes is None else f"{s.mttd_median_minutes:.0f}"
    inc = "-" if s.incidents_per_detected is None else f"{s.incidents_per_detected:.1f}"
    return f"{f'{s.detected}/{s.injected}':>8} {mttd:>10} {med:>8} {inc:>9}"


def render(fleetwatch: Scorecard, naive: Scorecard) -> str:
    """Both scorecards side by side, then the targets of ``fleetwatch``."""
    head = f"{'detected':>8} {'MTTD mean':>10} {'median':>8} {'inc/det':>9}"
    rule = "-" * 27 + "-+-" + "-" * _W + "-+-" + "-" * _W
    lines = [
        f"{'':<27} | {'fleetwatch (FDR, persistence, grouping)':<{_W}} | "
        f"naive (PSI > {NAIVE_PSI:g}, per window)",
        f"{'incident kind':<27} | {head} | {head}",
        rule,
    ]
    for g in GROUPS:
        lines.append(f"{g:<27} | {_cell(fleetwatch.groups.get(g))} | {_cell(naive.groups.get(g))}")
    lines.append(rule)

    def row(name: str, f: str, n: str) -> None:
        lines.append(f"{name:<27} | {f:>{_W}} | {n:>{_W}}")

    row("alerts (pages)", f"{fleetwatch.alerts} ({fleetwatch.pages})", f"{naive.alerts} ({naive.pages})")
    row("alert precision", _fmt(fleetwatch.alert_precision, 3), _fmt(naive.alert_precision, 3))
    row("page precision", _fmt(fleetwatch.page_precision, 3), _fmt(naive.page_precision, 3))
    row("recall (all kinds)", f"{_fmt(fleetwatch.recall)} ({fleetwatch.detected}/{fleetwatch.injected})",
        f"{_fmt(naive.recall)} ({naive.detected}/{naive.injected})")
    row("false pages in control", f"{fleetwatch.false_pages_in_control}", f"{naive.false_pages_in_control}")
    row("  per 1,000 model-days", _fmt(fleetwatch.false_pages_per_1000_model_days),
        _fmt(naive.false_pages_per_1000_model_days))
    lines.append(f"(MTTD in simulated minutes, window = {fleetwatch.window_seconds / 60:g} min; "
                 f"inc/det: incidents per detected injected incident; control: "
                 f"{fleetwatch.control_model_days:.1f} model-days)")
    lines += ["", "targets (fleetwatch):"]
    for t in targets(fleetwatch):
        status = "n/a" if t.met is None else "met" if t.met else "MISSED"
        lines.append(f"  [{status:>6}] {t.name:<42} {t.value:>14}  (goal {t.goal})")
    return "\n".join(lines)


def describe(opts: SimOptions, scenario: Scenario, settings: Settings) -> list[str]:
    kinds: dict[str, int] = {}
    for i in scenario.incidents:
        kinds[i.kind] = kinds.get(i.kind, 0) + 1
    n_tier1 = sum(m.tier == 1 for m in scenario.fleet.models)
    fleet = scenario.fleet
    return [
        f"fleetwatch simulate: {len(fleet.models)} models x {len(fleet.models[0].features)} features from "
        f"{len(fleet.sources)} upstream sources, {scenario.days} simulated days from "
        f"{_iso(scenario.start)}, seed {scenario.seed}",
        f"  window = {WINDOW_SECONDS // 60} min of simulated time, ~{opts.rate_per_hour:g} predictions per "
        "model and hour on average (x0.6-1.6 by model, x0.6-1.4 by hour of day, x0.8 on weekends)",
        "  product defaults: every floor, FDR weight, check and the FDR capacity as shipped; "
        f"{n_tier1} tier-1 models with label-joined performance checks",
        f"  corpus: {len(scenario.incidents)} incidents ("
        + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        + f"); {len(scenario.control_models())} models never touched",
    ]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC (%a)")


def unmapped_summary(card: Scorecard) -> str:
    """Alerts that map to no incident, by check and kind of feature (one line)."""
    parts = [f"{key} {n}" for key, n in card.unmapped_by_check.items()]
    return f"  {card.policy}: " + (", ".join(parts) if parts else "none")


def missed_summary(card: Scorecard, evidence: dict[str, Any]) -> list[str]:
    """One line per missed incident: what it was, and its strongest evidence."""
    out = []
    for r in sorted(card.incidents, key=lambda r: (r.group, r.id)):
        if r.detected:
            continue
        what = f"{r.id:<20} {r.models[0] if len(r.models) == 1 else f'{len(r.models)} models':<9}"
        what += f" {', '.join(r.features)[:30]:<30}" if r.features else f" {'':<30}"
        what += f" PSI {r.psi:g}" if r.psi is not None else f" magnitude {r.magnitude:.3g}"
        e = evidence.get(r.id) or {}
        n_inc = e.get("inconclusive", 0)
        tail = f"; {n_inc} results inconclusive (sketch error)" if n_inc else ""
        if "check" not in e:
            out.append(f"  {what}: no decided test (e.g. no history){tail}")
        else:
            out.append(f"  {what}: {e['feature'] or '(window)'}/{e['check']} effect "
                       f"{e['effect_size']:.3g} (floor {e['floor']:g}), p {e['p_value']:.2g}{tail}")
    return out or ["  none"]


def notes(scenario: Scenario) -> list[str]:
    """What the scenario cannot measure, said next to the table."""
    out = []
    if scenario.days <= 7 and any(i.kind == VOLUME_DROP for i in scenario.incidents):
        out.append("  note: with no past week, the volume test compares a window with the same hour on "
                   "past days of its kind (weekday/weekend), else reads the model's level through the "
                   "fleet's records in the trailing hours (docs/detectors.md)")
    return out
