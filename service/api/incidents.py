"""Incident endpoints: alerts grouped by root cause (declared lineage, else feature name)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query

from service.alerting.models import Incident
from service.api.alerts import ALERT_EXAMPLE
from service.api.deps import AlertStoreDep
from service.api.errors import ApiError, ErrorBody
from service.api.params import Offset, json_example, limit_query

router = APIRouter(prefix="/v1/incidents", tags=["incidents"])
MAX_INCIDENTS_PAGE = 500

INCIDENT_EXAMPLE: dict[str, Any] = {
    "id": "9a7b3c1d2e4f5a6b", "group_key": "source:payments_db", "source": "payments_db",
    "title": "upstream source payments_db failing", "created_at": 1_700_007_001.5, "state": "open",
    "severity": "critical", "models": ["fraud-v3"],
    "features": ["amount"], "checks": ["psi"], "first_window_start": 1_700_006_400, "alert_count": 1,
    "alerts": [ALERT_EXAMPLE]}


@router.get("", summary="Incidents, newest first",
            response_model=list[Incident], response_model_exclude_unset=True,
            description="The incidents opened since `since`, in `state` and touching `model`; `limit` "
                        "and `offset` page what the filters selected.",
            responses={200: json_example([INCIDENT_EXAMPLE]), 422: {"model": ErrorBody}})
async def list_incidents(
    alerts: AlertStoreDep,
    state: Annotated[Literal["open", "resolved"] | None, Query(description="open or resolved")] = None,
    model: Annotated[str | None, Query(description="Only incidents touching this model")] = None,
    since: Annotated[datetime | None, Query(description="Opened at or after (ISO 8601 or Unix s)")] = None,
    limit: Annotated[int, limit_query(MAX_INCIDENTS_PAGE)] = 50,
    offset: Offset = 0,
) -> list[Incident]:
    lo = since.replace(tzinfo=since.tzinfo or UTC).timestamp() if since else 0

    def keep(incident: Incident) -> bool:
        return (state is None or incident.state == state) and (model is None or model in incident.models)

    return await alerts.incidents(lo, limit, offset, None if state is None and model is None else keep)


@router.get("/{incident_id}", summary="One incident with its alerts",
            response_model=Incident, response_model_exclude_unset=True,
            responses={200: json_example(INCIDENT_EXAMPLE), 404: {"model": ErrorBody}})
async def get_incident(
    incident_id: Annotated[str, Path(description="Incident id",
                                     openapi_examples={"incident": {"value": "9a7b3c1d2e4f5a6b"}})],
    alerts: AlertStoreDep,
) -> Incident:
    incident = await alerts.incident(incident_id)
    if incident is None:
        raise ApiError(404, "incident_not_found", f"unknown incident {incident_id!r}", "incident_id")
    return incident
