"""HTTP ingest for producers that cannot embed the Python SDK: ``POST /v1/ingest``.

Accepts a batch of prediction records as JSON (the fields of
:class:`sdk.record.PredictionRecord`), validates every record with the SDK's
contract and produces them to the predictions topic in the SDK's wire
encoding, one message per model and at most ``INGEST_BATCH_RECORDS`` records.
A batch is all or nothing: one invalid record answers 422 naming its index
and field, and nothing of the batch is produced. Delivery is at least once:
a 503 after a partial produce, retried by the caller, may duplicate records.

The Kafka producer is created on the first request and closed with the app
(:func:`close`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import Field

from detectors.strict import StrictModel
from sdk.batching import split_messages
from sdk.columns import RecordColumns
from sdk.record import PredictionRecord, RecordError, validate_record
from sdk.wire import encode_columns
from sdk.worker import resolve_compression
from service.api.errors import UNAVAILABLE_RESPONSE, ApiError, ErrorBody, unavailable
from service.api.model_routes import json_example
from service.profiles.models import IMPLICIT_RATE_SECONDS

router = APIRouter(prefix="/v1", tags=["ingest"])
MAX_INGEST_RECORDS = 10_000
INGEST_BATCH_RECORDS = 1_000
MAX_MESSAGE_BYTES = 1_000_000  # under Kafka's default message.max.bytes


class IngestBatch(StrictModel):
    records: list[dict[str, Any]] = Field(
        ..., min_length=1, max_length=MAX_INGEST_RECORDS,
        description="Prediction records: model_id, model_version, prediction_id, event_time "
                    "(Unix s), features, and optionally score, class_probabilities, "
                    "predicted_label, slices, latency_ms",
    )

    model_config = {"json_schema_extra": {"examples": [{"records": [
        {"model_id": "fraud-v2", "model_version": "2.3", "prediction_id": "req-81f3",
         "event_time": 1_700_000_000.0, "features": {"amount": 12.5, "country": "DE"}, "score": 0.07}
    ]}]}}


def _validated(records: list[dict[str, Any]]) -> dict[str, list[tuple[int, PredictionRecord]]]:
    """Valid records grouped by model, with their index in the request.

    Raises
    ------
    ApiError
        422 naming ``records[i].<field>`` of the first invalid record.
    """
    by_model: dict[str, list[tuple[int, PredictionRecord]]] = {}
    for i, data in enumerate(records):
        try:
            record = validate_record(data)
        except RecordError as exc:
            raise ApiError(422, "invalid_record", f"records[{i}].{exc.field}: {exc.message}",
                           f"records[{i}].{exc.field}") from None
        by_model.setdefault(record.model_id, []).append((i, record))
    return by_model


async def _admit(request: Request, records: list[dict[str, Any]],
                 by_model: dict[str, list[PredictionRecord]]) -> None:
    """Refuse the batch if it would create more models implicitly (records of models never
    registered) than the budgets allow; registered models always pass.

    Raises
    ------
    ApiError
        429 (with Retry-After) past ``implicit_models_per_minute``, 422 past
        ``implicit_models_max``, naming the first record of a refused model.
    """
    s, now = request.app.state.settings, time.time()
    outcomes = await request.app.state.store.admit_models(
        by_model, s.implicit_models_per_minute, s.implicit_models_max, now, all_or_nothing=True)
    refused = {m: o for m, o in outcomes.items() if o.startswith("refused")}
    if not refused:
        return
    i = next(i for i, r in enumerate(records) if r.get("model_id") in refused)
    model_id = records[i]["model_id"]
    field = f"records[{i}].model_id"
    if refused[model_id] == "refused_rate":
        retry = IMPLICIT_RATE_SECONDS - int(now) % IMPLICIT_RATE_SECONDS
        raise ApiError(429, "implicit_model_limit", f"{field}: model {model_id!r} is not registered and "
                       f"{s.implicit_models_per_minute} models were created implicitly this minute "
                       "(FLEETWATCH_IMPLICIT_MODELS_PER_MINUTE): register it (POST /v1/models) or retry",
                       field, headers={"Retry-After": str(retry)})
    raise ApiError(422, "implicit_model_limit", f"{field}: model {model_id!r} is not registered and "
                   f"{s.implicit_models_max} models were created implicitly "
                   "(FLEETWATCH_IMPLICIT_MODELS_MAX): register it first (POST /v1/models)", field)


async def _producer(app: FastAPI):
    """The app's producer, started on first use.

    Raises
    ------
    ApiError
        503 if no broker is configured or it cannot be reached.
    """
    state = app.state
    lock = getattr(state, "ingest_lock", None)
    if lock is None:
        lock = state.ingest_lock = asyncio.Lock()
    async with lock:
        producer = getattr(state, "ingest_producer", None)
        if producer is not None:
            return producer
        settings = state.settings
        if not settings.kafka_bootstrap:
            raise unavailable("ingest_unavailable", "no Kafka bootstrap servers configured",
                              settings.api_retry_after_seconds)
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(
            bootstrap_servers=settings.kafka_bootstrap, acks="all",
            enable_idempotence=settings.kafka_enable_idempotence,
            compression_type=resolve_compression("auto"), max_request_size=MAX_MESSAGE_BYTES + 65_536,
        )
        try:
            await producer.start()
        except Exception as exc:
            await producer.stop()
            raise unavailable("broker_unavailable", f"Kafka unreachable: {exc}",
                              settings.api_retry_after_seconds) from None
        state.ingest_producer = producer
        return producer


async def close(app: FastAPI) -> None:
    """Stop the app's ingest producer, if one was started."""
    producer = getattr(app.state, "ingest_producer", None)
    if producer is not None:
        app.state.ingest_producer = None
        await producer.stop()


@router.post(
    "/ingest",
    summary="Validate prediction records and produce them to Kafka",
    responses={200: json_example({"accepted": 1, "messages": 1}, "Records produced, and Kafka messages"),
               413: {"model": ErrorBody, "description": "Body larger than FLEETWATCH_API_MAX_BODY_BYTES, or "
                                                        "one record encodes to more than 1 MB"},
               422: {"model": ErrorBody},
               429: {"model": ErrorBody, "description": "The batch would create more models implicitly "
                                                        "this minute than FLEETWATCH_IMPLICIT_MODELS_PER_"
                                                        "MINUTE allows (Retry-After: seconds)"},
               503: UNAVAILABLE_RESPONSE},
)
async def ingest(body: IngestBatch, request: Request) -> dict[str, Any]:
    by_model = _validated(body.records)
    await _admit(request, body.records, by_model)
    messages = []
    for model_id, indexed in by_model.items():
        split = split_messages(
            model_id.encode(), RecordColumns.from_records(model_id, [r for _i, r in indexed]),
            encode_columns, INGEST_BATCH_RECORDS, MAX_MESSAGE_BYTES)
        if split.unencodable:  # a value the wire cannot carry (e.g. a lone surrogate in a string)
            at, error = split.unencodable[0]
            where = f"records[{indexed[at][0]}]"
            raise ApiError(422, "invalid_record", f"{where}: cannot be encoded ({error})", where)
        if split.oversized:
            raise ApiError(413, "record_too_large",
                           f"a record of model {model_id!r} encodes to more than {MAX_MESSAGE_BYTES} bytes")
        messages += split.messages
    producer = await _producer(request.app)
    topic = request.app.state.settings.predictions_topic
    try:
        await asyncio.gather(*(producer.send_and_wait(topic, value, key=key) for key, value, _n in messages))
    except Exception as exc:
        raise unavailable("broker_unavailable", f"Kafka did not acknowledge: {exc}",
                          request.app.state.settings.api_retry_after_seconds) from None
    return {"accepted": sum(n for _k, _v, n in messages), "messages": len(messages)}
