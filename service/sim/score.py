"""The scorecard: how well a policy's alerts find the injected incidents. Pure; no I/O.

Definitions
-----------
- An alert **maps** to an incident when the incident explains its (model, feature) -- one
  of the incident's models and one of its features, or a model-level signal the incident's
  kind moves (:data:`service.sim.incidents.EXPLAINS`: the score and performance for data
  incidents, performance for concept drift, volume for a volume drop) -- and the alert's
  first breach window overlaps the incident's span ``[start, end)``.
- An incident is **detected** when at least one alert maps to it. **Recall** = detected /
  injected.
- **MTTD** (simulated minutes): from the incident's start to the moment the first mapped
  alert fired, i.e. the end (event time) of the window whose close fired it, or the latest
  record read by the look at the open window that fired it; also in windows.
- **Grouping**: the number of distinct fleetwatch incidents holding the mapped alerts on
  the incident's own features (model-level signals of a feature incident are keyed per
  model by design and counted apart; a model-level incident counts all its alerts). One is
  right; a lineage break should be exactly one incident.
- **Alert precision** = alerts that map to some incident / all alerts; page precision the
  same over alerts that notify (not inhibited, not silenced).
- **Control periods**: for each model, the simulated time outside ``[start - 1 window,
  end + GRACE_WINDOWS windows)`` of every incident touching it. **False pages per 1,000
  model-days** = notifying alerts that map to no incident and whose first breach lies in
  the model's control time, per 1,000 model-days of control time.

The naive policy it is compared with is :mod:`service.sim.naive`; the targets and the table
are :mod:`service.sim.report`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from service.alerting import models as alerting
from service.sim.incidents import (
    COVARIATE_SHIFT,
    INCIDENT_KINDS,
    Incident,
)

DAY = 86_400
GRACE_WINDOWS = 3
TARGET_PSI = 0.25
DECIDED = ("ok", "drift")
SHIFT_LOW = "covariate_shift psi<0.25"
SHIFT_HIGH = "covariate_shift psi>=0.25"
#: Rows of the scorecard: incident kinds, covariate shifts split at the target PSI.
GROUPS = (SHIFT_LOW, SHIFT_HIGH, *[k for k in INCIDENT_KINDS if k != COVARIATE_SHIFT])


@dataclass(frozen=True)
class Alert:
    """An alert as scored (from the API, or a naive per-window page).

    Attributes
    ----------
    id, model_id, feature, check : str
    window_start, window_end : float
        The first breach window (Unix s, event time).
    fired_at : float
        Event time at which the alert fired: the end of the window whose close fired it, or
        the latest record a look at the open window read (``fired_at`` of the API's alert).
    incident_id : str or None
        The fleetwatch incident holding it (None for naive pages).
    notify : bool
        Whether it pages (not inhibited, not silenced).
    """

    id: str
    model_id: str
    feature: str
    check: str
    window_start: float
    window_end: float
    fired_at: float
    incident_id: str | None = None
    notify: bool = True


def from_api(a: alerting.Alert) -> Alert:
    """An alert of ``GET /v1/alerts``, as scored.

    Examples
    --------
    >>> a = from_api(alerting.Alert.model_construct(
    ...     id="x", model_id="m", feature="f", check="psi", window_start=0, window_end=3600,
    ...     fired_window_start=3600, incident_id="i", notify=True))
    >>> a.fired_at
    7200

    An alert a look at its open window fired fired at the event time of that look:

    >>> from_api(alerting.Alert.model_construct(
    ...     id="x", model_id="m", feature="f", check="null_rate", window_start=0, window_end=3600,
    ...     fired_window_start=0, fired_at=900.0, incident_id="i", notify=True)).fired_at
    900.0
    """
    return Alert(a.id, a.model_id, a.feature, a.check, a.window_start, a.window_end,
                 a.fired_event_time, a.incident_id, a.notify)


def maps_to(alert: Alert, incident: Incident) -> bool:
    """Does ``alert`` map to ``incident`` (explained (model, feature), first breach window
    overlapping the incident's span)?

    Examples
    --------
    >>> from service.sim.incidents import BROKEN_FEATURE
    >>> inc = Incident("broken_feature-0", BROKEN_FEATURE, 3600, 4 * 3600, ("m",), ("s.x",), 1.0)
    >>> a = Alert("a", "m", "s.x", "null_rate", 3 * 3600, 4 * 3600, 5 * 3600)
    >>> maps_to(a, inc), maps_to(Alert("b", "m", "s.x", "null_rate", 4 * 3600, 5 * 3600, 6 * 3600), inc)
    (True, False)
    >>> maps_to(Alert("c", "m2", "s.x", "null_rate", 3600, 7200, 10800), inc)
    False
    """
    return incident.explains(alert.model_id, alert.feature) and incident.overlaps(
        alert.window_start, alert.window_end)


def group_of(incident: Incident) -> str:
    """The scorecard row of an incident.

    Examples
    --------
    >>> group_of(Incident("c", COVARIATE_SHIFT, 0, 1, ("m",), ("f",), 0.5, "location", psi=0.25))
    'covariate_shift psi>=0.25'
    """
    if incident.kind == COVARIATE_SHIFT:
        return SHIFT_HIGH if (incident.psi or 0.0) >= TARGET_PSI else SHIFT_LOW
    return incident.kind


def excluded_spans(incidents: Iterable[Incident],
                   window_seconds: float) -> dict[str, list[tuple[float, float]]]:
    """Per model, the spans that are not control time (each incident touching the model,
    from one window before its start to :data:`GRACE_WINDOWS` windows after its end)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for inc in incidents:
        for m in inc.models:
            out.setdefault(m, []).append(
                (inc.start - window_seconds, inc.end + GRACE_WINDOWS * window_seconds))
    return out


def _covered(spans: Sequence[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of ``spans`` inside ``[lo, hi)``."""
    total, cur_lo, cur_hi = 0.0, None, None
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in spans):
        if b <= a:
            continue
        if cur_hi is None or a > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = a, b
        else:
            cur_hi = max(cur_hi, b)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total


def control_model_days(models: Iterable[str], incidents: Iterable[Incident], start: float,
                       end: float, window_seconds: float) -> float:
    """Model-days of control time in ``[start, end)``.

    Examples
    --------
    >>> inc = Incident("v", "volume_drop", 86_400, 2 * 86_400, ("a",), magnitude=0.5)
    >>> round(control_model_days(["a", "b"], [inc], 0, 4 * 86_400, 3600), 4)
    6.8333
    """
    spans = excluded_spans(incidents, window_seconds)
    total = 0.0
    for m in models:
        total += (end - start) - _covered(spans.get(m, []), start, end)
    return total / DAY


def in_control(alert: Alert, spans: Mapping[str, Sequence[tuple[float, float]]]) -> bool:
    """Is the alert's first breach in its model's control time?"""
    return not any(a <= alert.window_start < b for a, b in spans.get(alert.model_id, ()))


@dataclass
class IncidentResult:
    """How one injected incident fared."""

    id: str
    kind: str
    group: str
    models: list[str]
    features: list[str]
    start: float
    end: float
    magnitude: float
    psi: float | None
    detected: bool
    mttd_minutes: float | None
    mttd_windows: float | None
    first_alert: str | None
    alerts: int
    fleet_incidents: int


@dataclass
class GroupScore:
    """One row of the scorecard."""

    group: str
    injected: int
    detected: int
    recall: float | None
    mttd_mean_minutes: float | None
    mttd_median_minutes: float | None
    mttd_max_minutes: float | None
    mttd_mean_windows: float | None
    incidents_per_detected: float | None


@dataclass
class Scorecard:
    """A policy's scorecard on one scenario."""

    policy: str
    window_seconds: float
    alerts: int
    pages: int
    mapped_alerts: int
    mapped_pages: int
    alert_precision: float | None
    page_precision: float | None
    injected: int
    detected: int
    recall: float | None
    control_model_days: float
    false_alerts_in_control: int
    false_pages_in_control: int
    false_pages_per_1000_model_days: float | None
    groups: dict[str, GroupScore] = field(default_factory=dict)
    incidents: list[IncidentResult] = field(default_factory=list)
    unmapped_by_check: dict[str, int] = field(default_factory=dict)
    unmapped: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def score_incident(incident: Incident, alerts: Sequence[Alert], window_seconds: float,
                   grouped: bool = True) -> IncidentResult:
    """Detection, MTTD and grouping of one incident.

    Parameters
    ----------
    grouped : bool
        False for a policy without grouping: every page on the incident's features
        counts as an incident of its own.

    Examples
    --------
    >>> from service.sim.incidents import LINEAGE_BREAK
    >>> inc = Incident("lineage_break-0", LINEAGE_BREAK, 1800, 5 * 3600, ("a", "b"),
    ...                ("s.x", "s.y"), 1.0, source="s")
    >>> alerts = [Alert("1", "a", "s.x", "null_rate", 0, 3600, 7200, "I1"),
    ...           Alert("2", "b", "s.y", "null_rate", 3600, 7200, 10800, "I1"),
    ...           Alert("3", "b", "__score__", "psi", 3600, 7200, 10800, "I2")]
    >>> r = score_incident(inc, alerts, 3600)
    >>> r.detected, r.mttd_minutes, r.mttd_windows, r.alerts, r.fleet_incidents
    (True, 90.0, 1.5, 3, 1)
    >>> score_incident(inc, alerts, 3600, grouped=False).fleet_incidents
    2
    """
    mine = [a for a in alerts if maps_to(a, incident)]
    first = min(mine, key=lambda a: (a.fired_at, a.id)) if mine else None
    mttd = None if first is None else max(0.0, first.fired_at - incident.start) / 60.0
    # model-level kinds (score, performance, volume) have no features: all their alerts
    own = [a for a in mine if a.feature in incident.features or not incident.features]
    # without grouping, every page on the incident is an incident of its own
    n_incidents = len({a.incident_id or a.id for a in own}) if grouped else len(own)
    return IncidentResult(
        id=incident.id, kind=incident.kind, group=group_of(incident), models=list(incident.models),
        features=list(incident.features), start=incident.start, end=incident.end,
        magnitude=incident.magnitude, psi=incident.psi, detected=first is not None,
        mttd_minutes=None if mttd is None else round(mttd, 2),
        mttd_windows=None if mttd is None else round(mttd * 60.0 / window_seconds, 3),
        first_alert=None if first is None else first.id, alerts=len(mine),
        fleet_incidents=n_incidents)


def _group_score(group: str, results: Sequence[IncidentResult], window_seconds: float) -> GroupScore:
    found = [r for r in results if r.detected]
    mttd = [r.mttd_minutes for r in found if r.mttd_minutes is not None]
    return GroupScore(
        group=group, injected=len(results), detected=len(found),
        recall=_ratio(len(found), len(results)),
        mttd_mean_minutes=round(statistics.fmean(mttd), 1) if mttd else None,
        mttd_median_minutes=round(statistics.median(mttd), 1) if mttd else None,
        mttd_max_minutes=round(max(mttd), 1) if mttd else None,
        mttd_mean_windows=round(statistics.fmean(mttd) * 60.0 / window_seconds, 2) if mttd else None,
        incidents_per_detected=(round(statistics.fmean(r.fleet_incidents for r in found), 2)
                                if found else None),
    )


def scorecard(policy: str, incidents: Sequence[Incident], alerts: Sequence[Alert],
              models: Iterable[str], start: float, end: float, window_seconds: float,
              grouped: bool = True, feature_kinds: Mapping[str, str] | None = None) -> Scorecard:
    """Score a policy's alerts against the injected incidents of a scenario.

    Parameters
    ----------
    policy : str
        A name for the report.
    incidents : sequence of Incident
    alerts : sequence of Alert
    models : iterable of str
        Every model of the fleet (for control model-days).
    start, end : float
        The simulated span (Unix s).
    window_seconds : float
    grouped : bool
        Whether the policy groups alerts into incidents (naive: False).
    feature_kinds : mapping, optional
        Feature -> its kind, to count the unmapped alerts by ``"<check> on <kind>"``
        (else by feature name).

    Returns
    -------
    Scorecard
        ``unmapped`` lists at most 200 unmapped alerts; ``unmapped_by_check`` counts all.

    Examples
    --------
    >>> from service.sim.incidents import UNIT_CHANGE
    >>> inc = Incident("unit_change-0", UNIT_CHANGE, 2 * 3600, 6 * 3600, ("a",), ("s.x",), 1000.0)
    >>> alerts = [Alert("1", "a", "s.x", "psi", 2 * 3600, 3 * 3600, 4 * 3600, "I1"),
    ...           Alert("2", "b", "s.z", "psi", 9 * 3600, 10 * 3600, 11 * 3600, "I2")]
    >>> card = scorecard("fleetwatch", [inc], alerts, ["a", "b"], 0, 86_400, 3600)
    >>> card.alert_precision, card.recall, card.groups["unit_change"].mttd_mean_windows
    (0.5, 1.0, 2.0)
    >>> card.false_pages_in_control, round(card.control_model_days, 3)
    (1, 1.667)
    """
    results = [score_incident(i, alerts, window_seconds, grouped) for i in incidents]
    mapped = [a for a in alerts if any(maps_to(a, i) for i in incidents)]
    mapped_ids = {a.id for a in mapped}
    spans = excluded_spans(incidents, window_seconds)
    unmapped = [a for a in alerts if a.id not in mapped_ids]
    control_false = [a for a in unmapped if in_control(a, spans)]
    model_days = control_model_days(models, incidents, start, end, window_seconds)
    false_pages = sum(a.notify for a in control_false)
    pages = [a for a in alerts if a.notify]
    groups = {g: _group_score(g, [r for r in results if r.group == g], window_seconds) for g in GROUPS}
    kinds = feature_kinds or {}
    by_check: dict[str, int] = {}
    for a in unmapped:
        key = f"{a.check} on {kinds.get(a.feature, a.feature or '(window)')}"
        by_check[key] = by_check.get(key, 0) + 1
    return Scorecard(
        policy=policy, window_seconds=window_seconds, alerts=len(alerts), pages=len(pages),
        mapped_alerts=len(mapped), mapped_pages=sum(a.id in mapped_ids for a in pages),
        alert_precision=_ratio(len(mapped), len(alerts)),
        page_precision=_ratio(sum(a.id in mapped_ids for a in pages), len(pages)),
        injected=len(results), detected=sum(r.detected for r in results),
        recall=_ratio(sum(r.detected for r in results), len(results)),
        control_model_days=round(model_days, 3),
        false_alerts_in_control=len(control_false), false_pages_in_control=false_pages,
        false_pages_per_1000_model_days=(round(1000.0 * false_pages / model_days, 3)
                                         if model_days > 0 else None),
        groups=groups, incidents=results,
        unmapped_by_check=dict(sorted(by_check.items(), key=lambda kv: (-kv[1], kv[0]))),
        unmapped=[asdict(a) for a in sorted(unmapped, key=lambda a: (a.window_start, a.model_id))[:200]],
    )
