"""Silence endpoints: mute matching alerts for a time (Alertmanager's silences)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field, ValidationInfo, ValidatorFunctionWrapHandler, field_validator

from detectors.policy.silence import Silence, SilenceSpec, SilenceState
from service.api.deps import SettingsDep, SilenceStoreDep
from service.api.errors import ApiError, ErrorBody
from service.api.params import MatcherView, Offset, check_regex_lengths, limit_query

router = APIRouter(prefix="/v1/silences", tags=["silences"])
MAX_SILENCES_PAGE = 1_000
SilenceId = Annotated[str, Path(description="Silence id",
                                openapi_examples={"silence": {"value": "4d2c0f6e8a9b41c7a3e5d1f0b2c4e6a8"}})]


class SilenceView(BaseModel):
    """A silence with its state at the time of the request."""

    id: str
    state: SilenceState = Field(..., description="pending | active | expired, now")
    matchers: list[MatcherView]
    starts_at: datetime = Field(..., description="Start, inclusive (UTC)")
    ends_at: datetime = Field(..., description="End, exclusive (UTC)")
    created_by: str
    comment: str
    created_at: datetime

    model_config = {"json_schema_extra": {"examples": [{
        "id": "4d2c0f6e8a9b41c7a3e5d1f0b2c4e6a8", "state": "active",
        "matchers": [{"name": "model", "value": "fraud-v3", "regex": False, "equal": True,
                      "usable": True}],
        "starts_at": "2024-05-01T12:00:00Z", "ends_at": "2024-05-01T14:00:00Z", "created_by": "ana",
        "comment": "retraining fraud-v3", "created_at": "2024-05-01T12:00:00Z"}]}}


class SilenceRequest(SilenceSpec):
    """The body of ``POST /v1/silences``: a :class:`SilenceSpec` whose times must
    stay in range once converted to UTC (``0001-01-01T00:00:00+01:00`` does not),
    answered 422 naming the field instead of an OverflowError."""

    @field_validator("starts_at", "ends_at", mode="wrap")
    @classmethod
    def _utc_in_range(cls, value: object, handler: ValidatorFunctionWrapHandler,
                      info: ValidationInfo) -> datetime | None:
        try:
            return handler(value)
        except OverflowError:
            raise ValueError("date out of range once converted to UTC") from None


def _now() -> datetime:
    return datetime.fromtimestamp(time.time(), UTC)


def _view(silence: Silence, now: datetime) -> SilenceView:
    return SilenceView(**{**dict(silence), "matchers": [MatcherView.of(m) for m in silence.matchers]},
                       state=silence.state(now))


def _not_found(silence_id: str) -> ApiError:
    return ApiError(404, "silence_not_found", f"unknown silence {silence_id!r}", "silence_id")


@router.post("", status_code=201, summary="Create a silence",
             responses={422: {"model": ErrorBody}})
async def create_silence(body: SilenceRequest, silences: SilenceStoreDep,
                         settings: SettingsDep) -> SilenceView:
    check_regex_lengths(body.matchers, settings.matcher_regex_max_length)
    now = _now()
    try:
        silence = await silences.create(body, now)
    except ValueError as exc:
        raise ApiError(422, "invalid_request", str(exc), "ends_at") from None
    return _view(silence, now)


@router.get("", summary="Silences, newest first", responses={422: {"model": ErrorBody}})
async def list_silences(
    silences: SilenceStoreDep,
    state: Annotated[SilenceState | None, Query(description="Only silences in this state")] = None,
    limit: Annotated[int, limit_query(MAX_SILENCES_PAGE)] = 100,
    offset: Offset = 0,
) -> list[SilenceView]:
    now = _now()
    page = (await silences.list(state, now))[offset:offset + limit]
    return [_view(s, now) for s in page]


@router.get("/{silence_id}", summary="One silence", responses={404: {"model": ErrorBody}})
async def get_silence(silence_id: SilenceId, silences: SilenceStoreDep) -> SilenceView:
    silence = await silences.get(silence_id)
    if silence is None:
        raise _not_found(silence_id)
    return _view(silence, _now())


@router.delete("/{silence_id}", summary="Expire a silence (it stays listed as expired)",
               responses={404: {"model": ErrorBody}})
async def expire_silence(silence_id: SilenceId, silences: SilenceStoreDep) -> SilenceView:
    now = _now()
    silence = await silences.expire(silence_id, now)
    if silence is None:
        raise _not_found(silence_id)
    return _view(silence, now)
