"""Alert endpoints."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from service.api.errors import ApiError, ErrorBody
from service.api.models import require_model, store_of

router = APIRouter(prefix="/v1/alerts", tags=["alerts"])


class AlertState(StrEnum):
    firing = "firing"
    acknowledged = "acknowledged"
    resolved = "resolved"


@router.get("", summary="Alerts, newest first", responses={404: {"model": ErrorBody}})
async def list_alerts(
    request: Request,
    model: Annotated[str | None, Query(description="Only this model's alerts")] = None,
    state: Annotated[AlertState | None, Query(description="Only alerts in this state")] = None,
    since: Annotated[datetime | None, Query(description="Created at or after (ISO 8601 or Unix s)")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[dict[str, Any]]:
    store = store_of(request)
    if model is not None:
        await require_model(store, model)
    lo = since.replace(tzinfo=since.tzinfo or UTC).timestamp() if since else 0
    alerts = await store.alerts(model, lo, limit, offset)
    if state is not None:
        alerts = [a for a in alerts if a["state"] == state.value]
    return alerts


@router.get("/{alert_id}", summary="One alert", responses={404: {"model": ErrorBody}})
async def get_alert(alert_id: str, request: Request) -> dict[str, Any]:
    alert = await store_of(request).alert(alert_id)
    if alert is None:
        raise ApiError(404, "alert_not_found", f"unknown alert {alert_id!r}", "alert_id")
    return alert
