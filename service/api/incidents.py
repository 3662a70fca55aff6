"""Incident endpoints: alerts grouped by root cause (declared lineage, else feature name)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request

from detectors.policy.severity import highest
from service.api.alerts import alerts_of
from service.api.errors import ApiError, ErrorBody

router = APIRouter(prefix="/v1/incidents", tags=["incidents"])


def summarize(incident: dict[str, Any]) -> dict[str, Any]:
    """An incident with its state, severity and scope derived from its alerts."""
    alerts = incident["alerts"]
    open_ = [a for a in alerts if a["state"] != "resolved"]
    return {
        **{k: v for k, v in incident.items() if k != "alerts"},
        "state": "open" if open_ else "resolved",
        "severity": highest([a["severity"] for a in open_ or alerts]),
        "models": sorted({a["model_id"] for a in alerts}),
        "features": sorted({a["feature"] for a in alerts}),
        "checks": sorted({a["check"] for a in alerts}),
        "first_window_start": min((a["window_start"] for a in alerts), default=None),
        "alert_count": len(alerts),
        "alerts": alerts,
    }


@router.get("", summary="Incidents, newest first")
async def list_incidents(
    request: Request,
    state: Annotated[Literal["open", "resolved"] | None, Query(description="open or resolved")] = None,
    model: Annotated[str | None, Query(description="Only incidents touching this model")] = None,
    since: Annotated[datetime | None, Query(description="Opened at or after (ISO 8601 or Unix s)")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> list[dict[str, Any]]:
    lo = since.replace(tzinfo=since.tzinfo or UTC).timestamp() if since else 0
    out = [summarize(i) for i in await alerts_of(request).incidents(lo, limit, offset)]
    return [i for i in out if (state is None or i["state"] == state)
            and (model is None or model in i["models"])]


@router.get("/{incident_id}", summary="One incident with its alerts",
            responses={404: {"model": ErrorBody}})
async def get_incident(incident_id: str, request: Request) -> dict[str, Any]:
    incident = await alerts_of(request).incident(incident_id)
    if incident is None:
        raise ApiError(404, "incident_not_found", f"unknown incident {incident_id!r}", "incident_id")
    return summarize(incident)
