"""The incident page: its alerts on a timeline, its notifications, the matchers of a silence."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from service.alerting.models import Alert, Incident
from service.paging.outbox import Outbox
from service.ui import charts
from service.ui.views.common import Ctx, config_of, feature_label


@dataclass(frozen=True)
class IncidentView:
    incident: Incident
    alerts: list[Alert]
    timeline: charts.Timeline
    notifications: list[dict[str, Any]]
    silence_matchers: list[dict[str, Any]]


def _alternation(values: Sequence[str]) -> str:
    return "|".join(re.escape(v) for v in sorted(set(values)))


def silence_matchers(incident: Incident) -> list[dict[str, Any]]:
    """Matchers that silence exactly this incident's scope: its models and its features
    (anchored regular expressions when there are several)."""
    out = []
    for name, values in (("model", incident.models), ("feature", [f for f in incident.features if f])):
        if len(values) == 1:
            out.append({"name": name, "value": values[0], "regex": False})
        elif values:
            out.append({"name": name, "value": _alternation(values), "regex": True})
    return out


async def incident_view(ctx: Ctx, incident: Incident) -> IncidentView:
    """The incident page."""
    configs = await ctx.store.model_configs(incident.models)
    rows = []
    alerts = sorted(
        incident.alerts,
        key=lambda a: (not a.open(), a.window_start, a.model_id, a.feature, a.check),
    )
    for a in alerts:
        length = config_of(configs.get(a.model_id)).window_seconds
        end = (a.resolved_window_start or a.last_window_start) + length
        kind = a.state + (" muted" if a.inhibited_by or a.silenced_by else "")
        rows.append(
            (
                f"{a.model_id} · {feature_label(a.feature)} · {a.check}",
                f"/ui/models/{a.model_id}/features/{a.feature}" if a.feature else f"/ui/models/{a.model_id}",
                a.window_start,
                end,
                kind,
                [e.window_start for e in a.evidence],
            )
        )
    seconds = min((config_of(c).window_seconds for c in configs.values()), default=300)
    log = [i.view() for i in await Outbox(ctx.store.r).for_incident(incident.id)]
    return IncidentView(incident, alerts, charts.timeline(rows, seconds), log, silence_matchers(incident))
