"""Silence endpoints: mute matching alerts for a time (Alertmanager's silences)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from detectors.policy.silence import Matcher, Silence, SilenceSpec, SilenceState
from service.api.errors import ApiError, ErrorBody
from service.silences import SilenceStore

router = APIRouter(prefix="/v1/silences", tags=["silences"])


class SilenceView(BaseModel):
    """A silence with its state at the time of the request."""

    id: str
    state: SilenceState = Field(..., description="pending | active | expired, now")
    matchers: list[Matcher]
    starts_at: datetime = Field(..., description="Start, inclusive (UTC)")
    ends_at: datetime = Field(..., description="End, exclusive (UTC)")
    created_by: str
    comment: str
    created_at: datetime


def silences_of(request: Request) -> SilenceStore:
    return SilenceStore(request.app.state.store.r)


def _now() -> datetime:
    return datetime.fromtimestamp(time.time(), UTC)


def _view(silence: Silence, now: datetime) -> SilenceView:
    return SilenceView(**dict(silence), state=silence.state(now))


def _not_found(silence_id: str) -> ApiError:
    return ApiError(404, "silence_not_found", f"unknown silence {silence_id!r}", "silence_id")


@router.post("", status_code=201, summary="Create a silence",
             responses={422: {"model": ErrorBody}})
async def create_silence(body: SilenceSpec, request: Request) -> SilenceView:
    now = _now()
    try:
        silence = await silences_of(request).create(body, now)
    except ValueError as exc:
        raise ApiError(422, "invalid_request", str(exc), "ends_at") from None
    return _view(silence, now)


@router.get("", summary="Silences, newest first", responses={422: {"model": ErrorBody}})
async def list_silences(
    request: Request,
    state: Annotated[SilenceState | None, Query(description="Only silences in this state")] = None,
) -> list[SilenceView]:
    now = _now()
    return [_view(s, now) for s in await silences_of(request).list(state, now)]


@router.get("/{silence_id}", summary="One silence", responses={404: {"model": ErrorBody}})
async def get_silence(silence_id: str, request: Request) -> SilenceView:
    silence = await silences_of(request).get(silence_id)
    if silence is None:
        raise _not_found(silence_id)
    return _view(silence, _now())


@router.delete("/{silence_id}", summary="Expire a silence (it stays listed as expired)",
               responses={404: {"model": ErrorBody}})
async def expire_silence(silence_id: str, request: Request) -> SilenceView:
    now = _now()
    silence = await silences_of(request).expire(silence_id, now)
    if silence is None:
        raise _not_found(silence_id)
    return _view(silence, now)
