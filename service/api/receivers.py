"""Receiver endpoints (where incidents are paged) and the notification outbox."""

from __future__ import annotations

import time
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, Field

from service.api.deps import OutboxDep, ReceiverStoreDep, SettingsDep
from service.api.errors import ApiError, ErrorBody
from service.api.params import MatcherView, Offset, check_regex_lengths, limit_query
from service.paging.kinds import ReceiverKind, kind_of
from service.paging.outbox import OutboxState
from service.paging.receiver_config import Receiver, ReceiverSpec
from service.paging.ssrf import UnsafeUrl, check_url

router = APIRouter(prefix="/v1/receivers", tags=["receivers"])
MAX_RECEIVERS_PAGE = 1_000
ReceiverId = Annotated[str, Path(
    description="Receiver id", openapi_examples={"receiver": {"value": "0b6f3c2a9d8e47f1b5a4c3d2e1f0a9b8"}})]
notifications_router = APIRouter(prefix="/v1/notifications", tags=["receivers"])


class ReceiverView(BaseModel):
    """A receiver as the API shows it: never its secret, routing key or API key; a Slack or
    Teams URL (itself the credential) with its path hidden."""

    id: str
    name: str
    kind: ReceiverKind
    url: str = Field(..., description="Destination (slack, teams: path hidden)")
    has_secret: bool = Field(..., description="Deliveries are HMAC-signed")
    has_routing_key: bool = Field(..., description="A PagerDuty routing key is stored")
    has_api_key: bool = Field(False, description="An Opsgenie API key is stored")
    matchers: list[MatcherView]
    group_wait_seconds: float
    group_interval_seconds: float
    repeat_interval_seconds: float
    max_per_minute: int
    created_at: float = Field(..., description="Unix seconds")

    model_config = {"json_schema_extra": {"examples": [{
        "id": "0b6f3c2a9d8e47f1b5a4c3d2e1f0a9b8", "name": "payments on-call", "kind": "pagerduty",
        "url": "https://events.pagerduty.com/v2/enqueue", "has_secret": False, "has_routing_key": True,
        "matchers": [
            {"name": "team", "value": "payments", "regex": False, "equal": True, "usable": True},
            {"name": "severity", "value": "critical", "regex": False, "equal": True, "usable": True}],
        "group_wait_seconds": 30.0, "group_interval_seconds": 300.0, "repeat_interval_seconds": 14400.0,
        "max_per_minute": 60, "created_at": 1_714_564_800.0}]}}


class NotificationView(BaseModel):
    """One notification of the outbox."""

    id: str = Field(..., description="Also sent as the X-Fleetwatch-Delivery header")
    receiver_id: str
    receiver_kind: ReceiverKind
    incident_id: str
    action: str = Field(..., description="trigger, update, repeat, acknowledge or resolve")
    state: OutboxState = Field(..., description="pending, delivered or dead")
    attempts: int
    created_at: float = Field(..., description="Unix seconds")
    due_at: float | None = Field(None, description="Next attempt (pending), Unix seconds")
    finished_at: float | None = Field(None, description="Delivered or dead-lettered at, Unix seconds")
    last_error: str | None = Field(None, description="Why the last attempt failed or was deferred")
    body: dict[str, Any] = Field(..., description="The payload, without credentials")

    model_config = {"json_schema_extra": {"examples": [{
        "id": "7c1e2d3f4a5b6c7d8e9f0a1b2c3d4e5f", "receiver_id": "0b6f3c2a9d8e47f1b5a4c3d2e1f0a9b8",
        "receiver_kind": "pagerduty", "incident_id": "9a7b3c1d2e4f5a6b", "action": "trigger",
        "state": "delivered", "attempts": 1, "created_at": 1_714_564_830.0, "due_at": None,
        "finished_at": 1_714_564_830.4, "last_error": None,
        "body": {"event_action": "trigger", "dedup_key": "9a7b3c1d2e4f5a6b",
                 "payload": {"summary": "upstream source payments_db failing", "severity": "critical"}}}]}}


def _shown_url(r: Receiver) -> str:
    if not kind_of(r.kind).secret_url:
        return r.url or ""
    parts = urlsplit(r.url or "")
    return urlunsplit((parts.scheme, parts.netloc, "/…", "", ""))


def _view(r: Receiver) -> ReceiverView:
    return ReceiverView(
        id=r.id, name=r.name, kind=r.kind, url=_shown_url(r), has_secret=r.secret is not None,
        has_routing_key=r.routing_key is not None, has_api_key=r.api_key is not None,
        matchers=[MatcherView.of(m) for m in r.matchers],
        group_wait_seconds=r.group_wait_seconds, group_interval_seconds=r.group_interval_seconds,
        repeat_interval_seconds=r.repeat_interval_seconds, max_per_minute=r.max_per_minute,
        created_at=r.created_at)


def _not_found(receiver_id: str) -> ApiError:
    return ApiError(404, "receiver_not_found", f"unknown receiver {receiver_id!r}", "receiver_id")


@router.post("", status_code=201, summary="Create a receiver",
             responses={422: {"model": ErrorBody}})
async def create_receiver(body: ReceiverSpec, receivers: ReceiverStoreDep,
                          settings: SettingsDep) -> ReceiverView:
    check_regex_lengths(body.matchers, settings.matcher_regex_max_length)
    try:
        await check_url(body.url or "", settings.receiver_allow_nets)
    except UnsafeUrl as exc:
        raise ApiError(422, "unsafe_url", f"url: {exc}", "url") from None
    except OSError as exc:
        raise ApiError(422, "unresolvable_url", f"url: host does not resolve ({exc})", "url") from None
    return _view(await receivers.create(body, time.time()))


@router.get("", summary="Receivers, newest first", responses={422: {"model": ErrorBody}})
async def list_receivers(
    receivers: ReceiverStoreDep,
    limit: Annotated[int, limit_query(MAX_RECEIVERS_PAGE)] = 100,
    offset: Offset = 0,
) -> list[ReceiverView]:
    return [_view(r) for r in await receivers.list(limit, offset)]


@router.get("/{receiver_id}", summary="One receiver", responses={404: {"model": ErrorBody}})
async def get_receiver(receiver_id: ReceiverId, receivers: ReceiverStoreDep) -> ReceiverView:
    receiver = await receivers.get(receiver_id)
    if receiver is None:
        raise _not_found(receiver_id)
    return _view(receiver)


@router.delete("/{receiver_id}", status_code=204, summary="Delete a receiver",
               responses={404: {"model": ErrorBody}})
async def delete_receiver(receiver_id: ReceiverId, receivers: ReceiverStoreDep) -> Response:
    if not await receivers.delete(receiver_id):
        raise _not_found(receiver_id)
    return Response(status_code=204)


@notifications_router.get("", summary="Notifications of the outbox, newest first",
                          responses={422: {"model": ErrorBody}})
async def list_notifications(
    outbox: OutboxDep,
    state: Annotated[OutboxState | None, Query(description="pending, delivered or dead")] = None,
    limit: Annotated[int, limit_query(1_000)] = 100,
    offset: Annotated[int, Query(ge=0, le=100_000, description="Items to skip, 0 to 100000 (the outbox "
                                                               "merges its state indexes in memory)")] = 0,
) -> list[NotificationView]:
    items = await outbox.list(state, limit, offset)
    return [NotificationView(**i.view()) for i in items]
