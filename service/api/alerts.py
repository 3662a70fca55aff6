"""Alert endpoints: list, read, acknowledge, resolve."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import Field

from detectors.strict import StrictModel
from service.alerting.models import Alert
from service.alerting.policy import resolve_by_user
from service.alerting.store import AlertStore
from service.api.deps import AlertStoreDep, StoreDep, require_model
from service.api.errors import ApiError, ErrorBody
from service.api.params import Offset, json_example, limit_query

router = APIRouter(prefix="/v1/alerts", tags=["alerts"])
MAX_ALERTS_PAGE = 1_000

ALERT_EXAMPLE: dict[str, Any] = {
    "id": "5f0c1e9a2b7d4c3e", "model_id": "fraud-v3", "model_version": "3", "feature": "amount",
    "check": "psi", "state": "firing", "severity": "critical", "owner": "payments-ml", "tier": 1,
    "routing": {"team": "payments"}, "group_key": "source:payments_db", "source": "payments_db",
    "incident_id": "9a7b3c1d2e4f5a6b", "window_start": 1_700_006_400, "window_end": 1_700_006_700,
    "window_start_local": "2023-11-15T00:00:00+00:00",
    "fired_window_start": 1_700_006_700, "last_window_start": 1_700_006_700,
    "resolved_window_start": None, "effect_size": 0.41, "floor": 0.2, "p_value": 1.2e-9,
    "evidence_count": 2, "evidence": [{"window_start": 1_700_006_400, "effect_size": 0.38,
                                       "p_value": 3.0e-8}],
    "inhibited_by": [], "silenced_by": [], "notify": True, "created_at": 1_700_007_001.5,
    "updated_at": 1_700_007_001.5}
ACKED_EXAMPLE = {**ALERT_EXAMPLE, "state": "acknowledged", "acked_by": "ana@payments",
                 "acked_at": "1700007301.2", "ack_comment": "upstream fix deploying"}
RESOLVED_EXAMPLE = {**ALERT_EXAMPLE, "state": "resolved", "resolved_by": "ana@payments"}
AlertId = Annotated[str, Path(description="Alert id",
                              openapi_examples={"alert": {"value": "5f0c1e9a2b7d4c3e"}})]


class AlertState(StrEnum):
    firing = "firing"
    acknowledged = "acknowledged"
    resolved = "resolved"


class Severity(StrEnum):
    info = "info"
    warning = "warning"
    critical = "critical"


class UserAction(StrictModel):
    """Who acknowledges or resolves, and why."""

    by: str = Field(..., min_length=1, max_length=256, description="User or team acting")
    comment: str | None = Field(None, max_length=2048)

    model_config = {"extra": "forbid", "json_schema_extra": {"examples": [
        {"by": "ana@payments", "comment": "upstream fix deploying"}]}}


async def require_alert(alerts: AlertStore, alert_id: str) -> Alert:
    alert = await alerts.alert(alert_id)
    if alert is None:
        raise ApiError(404, "alert_not_found", f"unknown alert {alert_id!r}", "alert_id")
    return alert


async def require_unresolved(alerts: AlertStore, alert_id: str, resolved: str) -> Alert:
    """The alert; 404 when unknown, 409 ``alert_resolved`` (the message: the alert
    ``resolved``) when it is resolved."""
    alert = await require_alert(alerts, alert_id)
    if not alert.open():
        raise ApiError(409, "alert_resolved", f"alert {alert_id!r} {resolved}", "alert_id")
    return alert


@router.get("", summary="Alerts, newest first",
            response_model=list[Alert], response_model_exclude_unset=True,
            description="The alerts created since `since` (of `model`), in `state` and of `severity`; "
                        "`limit` and `offset` page what the filters selected.",
            responses={200: json_example([ALERT_EXAMPLE]), 404: {"model": ErrorBody},
                       422: {"model": ErrorBody}})
async def list_alerts(
    store: StoreDep,
    alerts: AlertStoreDep,
    model: Annotated[str | None, Query(description="Only this model's alerts")] = None,
    state: Annotated[AlertState | None, Query(description="Only alerts in this state")] = None,
    severity: Annotated[Severity | None, Query(description="Only alerts of this severity")] = None,
    since: Annotated[datetime | None, Query(description="Created at or after (ISO 8601 or Unix s)")] = None,
    limit: Annotated[int, limit_query(MAX_ALERTS_PAGE)] = 100,
    offset: Offset = 0,
) -> list[Alert]:
    if model is not None:
        await require_model(store, model)
    lo = since.replace(tzinfo=since.tzinfo or UTC).timestamp() if since else 0

    def keep(alert: Alert) -> bool:
        return ((state is None or alert.state == state.value)
                and (severity is None or alert.severity == severity.value))

    return await alerts.alerts(model, lo, limit, offset, None if state is None and severity is None else keep)


@router.get("/{alert_id}", summary="One alert",
            response_model=Alert, response_model_exclude_unset=True,
            responses={200: json_example(ALERT_EXAMPLE), 404: {"model": ErrorBody}})
async def get_alert(alert_id: AlertId, alerts: AlertStoreDep) -> Alert:
    return await require_alert(alerts, alert_id)


@router.post("/{alert_id}/ack", summary="Acknowledge a firing alert",
             response_model=Alert, response_model_exclude_unset=True,
             responses={200: json_example(ACKED_EXAMPLE),
                        404: {"model": ErrorBody}, 409: {"model": ErrorBody}})
async def ack_alert(alert_id: AlertId, body: UserAction, alerts: AlertStoreDep) -> Alert:
    alert = await require_unresolved(alerts, alert_id, "is resolved")
    await alerts.act(alert_id, {"acked_by": body.by, "acked_at": repr(time.time()),
                                "ack_comment": body.comment or ""})
    await alerts.emit("acknowledged", alert_id, alert.incident_id)
    return await require_alert(alerts, alert_id)


@router.post("/{alert_id}/resolve", summary="Resolve an alert by hand",
             response_model=Alert, response_model_exclude_unset=True,
             responses={200: json_example(RESOLVED_EXAMPLE),
                        404: {"model": ErrorBody}, 409: {"model": ErrorBody}})
async def resolve_alert(alert_id: AlertId, body: UserAction, alerts: AlertStoreDep) -> Alert:
    alert = await require_unresolved(alerts, alert_id, "is already resolved")
    await resolve_by_user(alerts, alert, body.by, body.comment, time.time())
    return await require_alert(alerts, alert_id)
