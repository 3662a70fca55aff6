"""``POST /v1/models/{id}/flush``: close a model's open windows now (backfills, replays)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from service.api.deps import SettingsDep, StoreDep, require_model
from service.api.errors import UNAVAILABLE_RESPONSE, ErrorBody, unavailable
from service.api.ingest import _producer
from service.api.params import ModelId
from service.profiles.control import FlushRequest

router = APIRouter(prefix="/v1/models", tags=["models"])


class FlushAccepted(BaseModel):
    """Where the flush request was written: the model's windows close once the aggregator
    owning ``partition`` has read past ``offset`` (usually within a checkpoint interval)."""

    model_id: str
    partition: int = Field(..., description="Predictions-topic partition holding the model's records")
    offset: int = Field(..., description="Offset of the flush request in that partition")


@router.post(
    "/{model_id}/flush", status_code=202, response_model=FlushAccepted,
    summary="Close the model's open windows now (after every record already sent)",
    responses={404: {"model": ErrorBody}, 503: UNAVAILABLE_RESPONSE},
)
async def flush(model_id: ModelId, request: Request, store: StoreDep, settings: SettingsDep) -> FlushAccepted:
    await require_model(store, model_id)
    producer = await _producer(request.app)
    key, value, headers = FlushRequest.now(model_id).encode()
    try:
        meta = await producer.send_and_wait(settings.predictions_topic, value,
                                            key=key, headers=headers)
    except Exception as exc:
        raise unavailable("broker_unavailable", f"Kafka did not take the flush request: {exc}",
                          settings.api_retry_after_seconds) from None
    return FlushAccepted(model_id=model_id, partition=meta.partition, offset=meta.offset)
