"""HTTP ingest for producers that cannot embed the Python SDK: ``POST /v1/ingest``.

Accepts a batch of prediction records as JSON (the fields of
:class:`sdk.record.PredictionRecord`), validates every record with the SDK's
contract and produces them to the predictions topic in the SDK's wire
encoding, one message per model and at most ``INGEST_BATCH_RECORDS`` records.
A batch is all or nothing: one invalid record answers 422 naming its index
and field, and nothing of the batch is produced. The exception is a vector
feature (a JSON list of numbers, :mod:`sdk.vectors`): a bad vector (wrong
length, a non-number, a non-finite component) drops that record's vector
only; the record is produced without it, the answer's ``vectors_dropped``
counts them and the model's ``records.rejected`` counts them under
``vector_dimension``, ``vector_not_finite`` or ``vector_wrong_type``. Delivery is at least once:
a 503 after a partial produce, retried by the caller, may duplicate records.

Refused records are counted per model and reason in the model's status
(``records.rejected`` of ``GET /v1/models/{id}/status``): the record a 4xx
names under its reason (a contract reason of :data:`sdk.record.RECORD_REASONS`,
``unencodable``, ``too_large`` for a record over 1 MB encoded), the other records
of the refused batch under :data:`IN_REFUSED_BATCH`; only models that exist are
counted (:meth:`service.profiles.store.Store.count_rejected`).

The Kafka producer is created on the first request and closed with the app
(:func:`close`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, Field

from detectors.strict import StrictModel
from sdk.batching import split_messages
from sdk.columns import RecordColumns
from sdk.record import TOO_LARGE, PredictionRecord, RecordError, validate_record
from sdk.vectors import drop_reason, is_vector, vector_bytes
from sdk.wire import encode_columns
from sdk.worker import resolve_compression
from service.api.errors import UNAVAILABLE_RESPONSE, ApiError, ErrorBody, unavailable
from service.api.params import json_example
from service.profiles.models import IMPLICIT_RATE_SECONDS
from service.registry import ModelConfig

router = APIRouter(prefix="/v1", tags=["ingest"])
MAX_INGEST_RECORDS = 10_000
INGEST_BATCH_RECORDS = 1_000
MAX_MESSAGE_BYTES = 1_000_000  # under Kafka's default message.max.bytes
#: Reason counted for the records of a refused batch other than the one the refusal names.
IN_REFUSED_BATCH = "in_refused_batch"
UNENCODABLE = "unencodable"
IMPLICIT_MODEL_LIMIT = "implicit_model_limit"

log = logging.getLogger(__name__)


class Refused(Exception):
    """A 4xx for the batch (``error``), with what it refuses: the records named
    (index -> reason; every other record of the batch is refused with it)."""

    def __init__(self, error: ApiError, named: dict[int, str]) -> None:
        super().__init__(error.detail)
        self.error = error
        self.named = named


def rejected_counts(records: list[dict[str, Any]], named: dict[int, str]) -> dict[str, Counter[str]]:
    """Refused records per model (the ``model_id`` a record names, when it is a string) and
    reason: ``named`` under theirs, the others under :data:`IN_REFUSED_BATCH`.

    Examples
    --------
    >>> rejected_counts([{"model_id": "a"}, {"model_id": "a"}, {"model_id": 7}, {}], {1: "not_finite"})
    {'a': Counter({'in_refused_batch': 1, 'not_finite': 1})}
    """
    out: dict[str, Counter[str]] = {}
    for i, r in enumerate(records):
        m = r.get("model_id") if isinstance(r, dict) else None
        if isinstance(m, str) and m:
            out.setdefault(m, Counter())[named.get(i, IN_REFUSED_BATCH)] += 1
    return out


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


def _without_bad_vectors(data: Any, i: int, dropped: dict[int, list[str]],
                         dims: dict[tuple[Any, str], int]) -> Any:
    """The record with each bad vector feature set to null (the reason added to ``dropped[i]``);
    a vector's length is the one ``dims`` holds for its model and feature (declared, else the
    batch's first vector of them, which this adds)."""
    features = data.get("features") if isinstance(data, dict) else None
    if not isinstance(features, dict) or not any(map(is_vector, features.values())):
        return data
    features = dict(features)
    model_id = data.get("model_id")
    for name, v in features.items():
        if is_vector(v) and isinstance(name, str) and isinstance(model_id, str):
            try:
                dims[model_id, name] = len(vector_bytes(v, name, dims.get((model_id, name)))) // 4
            except RecordError as exc:
                features[name] = None
                dropped.setdefault(i, []).append(drop_reason(exc))
    return {**data, "features": features}


async def _declared_dims(store: Any, records: list[dict[str, Any]]) -> dict[tuple[Any, str], int]:
    """(model, feature) -> the dimension its registration declares (``vector_features``), for
    the models whose records in the batch carry a vector (one read; none without vectors)."""
    ids = sorted({r["model_id"] for r in records
                  if isinstance(r, dict) and isinstance(r.get("model_id"), str)
                  and isinstance(r.get("features"), dict) and any(map(is_vector, r["features"].values()))})
    if not ids:
        return {}
    configs = await store.model_configs(ids)
    return {(m, name): dim for m, cfg in configs.items() if isinstance(cfg, ModelConfig)
            for name, dim in cfg.vector_features.items()}


def _validated(records: list[dict[str, Any]], dropped: dict[int, list[str]] | None = None,
               dims: dict[tuple[Any, str], int] | None = None
               ) -> dict[str, list[tuple[int, PredictionRecord]]]:
    """Valid records grouped by model, with their index in the request; a bad vector feature
    is dropped from its record (``dropped``: record index -> reasons), a vector of another
    length than its declared one (``dims``, :func:`_declared_dims`) or, undeclared, than
    the batch's first of its model and feature included.

    Raises
    ------
    Refused
        422 naming ``records[i].<field>`` of the first invalid record.
    """
    by_model: dict[str, list[tuple[int, PredictionRecord]]] = {}
    dims = dict(dims or {})
    for i, data in enumerate(records):
        if dropped is not None:
            data = _without_bad_vectors(data, i, dropped, dims)
        try:
            record = validate_record(data)
        except RecordError as exc:
            raise Refused(ApiError(422, "invalid_record", f"records[{i}].{exc.field}: {exc.message}",
                                   f"records[{i}].{exc.field}"), {i: exc.reason}) from None
        by_model.setdefault(record.model_id, []).append((i, record))
    return by_model


async def _admit(request: Request, records: list[dict[str, Any]],
                 by_model: dict[str, list[PredictionRecord]]) -> None:
    """Refuse the batch if it would create more models implicitly (records of models never
    registered) than the budgets allow; registered models always pass.

    Raises
    ------
    Refused
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
    named = {j: IMPLICIT_MODEL_LIMIT for j, r in enumerate(records) if r.get("model_id") in refused}
    if refused[model_id] == "refused_rate":
        retry = IMPLICIT_RATE_SECONDS - int(now) % IMPLICIT_RATE_SECONDS
        raise Refused(ApiError(
            429, "implicit_model_limit", f"{field}: model {model_id!r} is not registered and "
            f"{s.implicit_models_per_minute} models were created implicitly this minute "
            "(FLEETWATCH_IMPLICIT_MODELS_PER_MINUTE): register it (POST /v1/models) or retry",
            field, headers={"Retry-After": str(retry)}), named)
    raise Refused(ApiError(422, "implicit_model_limit", f"{field}: model {model_id!r} is not registered and "
                           f"{s.implicit_models_max} models were created implicitly "
                           "(FLEETWATCH_IMPLICIT_MODELS_MAX): register it first (POST /v1/models)", field),
                  named)


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


class IngestAccepted(BaseModel):
    """What ``POST /v1/ingest`` produced."""

    accepted: int = Field(..., description="Records produced")
    messages: int = Field(..., description="Kafka messages they were produced in")
    vectors_dropped: int = Field(0, description="Vector features dropped from their records (wrong "
                                                "length, not numbers or not finite)")


@router.post(
    "/ingest",
    summary="Validate prediction records and produce them to Kafka", response_model=IngestAccepted,
    responses={200: json_example({"accepted": 1, "messages": 1, "vectors_dropped": 0},
                                 "Records produced, Kafka messages, and vector features dropped from "
                                 "their records (wrong length, not numbers or not finite)"),
               413: {"model": ErrorBody, "description": "Body larger than FLEETWATCH_API_MAX_BODY_BYTES, or "
                                                        "one record encodes to more than 1 MB"},
               422: {"model": ErrorBody},
               429: {"model": ErrorBody, "description": "The batch would create more models implicitly "
                                                        "this minute than FLEETWATCH_IMPLICIT_MODELS_PER_"
                                                        "MINUTE allows (Retry-After: seconds)"},
               503: UNAVAILABLE_RESPONSE},
)
async def ingest(body: IngestBatch, request: Request) -> IngestAccepted:
    dropped: dict[int, list[str]] = {}
    try:
        messages = await _refusable(body, request, dropped)
    except Refused as refused:
        try:
            await request.app.state.store.count_rejected(rejected_counts(body.records, refused.named))
        except Exception as exc:  # the refusal is still answered; the count is lost
            log.warning("records refused by ingest not counted (redis: %s)", exc)
        raise refused.error from None
    producer = await _producer(request.app)
    topic = request.app.state.settings.predictions_topic
    try:
        await asyncio.gather(*(producer.send_and_wait(topic, value, key=key) for key, value, _n in messages))
    except Exception as exc:
        raise unavailable("broker_unavailable", f"Kafka did not acknowledge: {exc}",
                          request.app.state.settings.api_retry_after_seconds) from None
    if dropped:
        counts: dict[str, Counter[str]] = {}
        for i, reasons in dropped.items():
            counts.setdefault(body.records[i]["model_id"], Counter()).update(reasons)
        try:
            await request.app.state.store.count_rejected(counts)
        except Exception as exc:  # the records were produced; the count is lost
            log.warning("vectors dropped by ingest not counted (redis: %s)", exc)
    return IngestAccepted(accepted=sum(n for _k, _v, n in messages), messages=len(messages),
                          vectors_dropped=sum(map(len, dropped.values())))


async def _refusable(body: IngestBatch, request: Request, dropped: dict[int, list[str]]
                     ) -> list[tuple[bytes, bytes, int]]:
    """The batch's Kafka messages (key, value, records); the vectors dropped go to ``dropped``.

    Raises
    ------
    Refused
        A 4xx: an invalid record, a model over the implicit-model budget, a record the wire
        cannot encode or that encodes to more than :data:`MAX_MESSAGE_BYTES`.
    """
    by_model = _validated(body.records, dropped,
                          await _declared_dims(request.app.state.store, body.records))
    await _admit(request, body.records, by_model)
    messages = []
    for model_id, indexed in by_model.items():
        split = split_messages(
            model_id.encode(), RecordColumns.from_records(model_id, [r for _i, r in indexed]),
            encode_columns, INGEST_BATCH_RECORDS, MAX_MESSAGE_BYTES)
        if split.unencodable:  # a value the wire cannot carry (e.g. a lone surrogate in a string)
            at, error = split.unencodable[0]
            where = f"records[{indexed[at][0]}]"
            raise Refused(ApiError(422, "invalid_record", f"{where}: cannot be encoded ({error})", where),
                          {indexed[i][0]: UNENCODABLE for i, _e in split.unencodable})
        if split.oversized:
            # which records are too large is not kept: the model's records share the reason
            raise Refused(ApiError(413, "record_too_large", f"a record of model {model_id!r} encodes to "
                                   f"more than {MAX_MESSAGE_BYTES} bytes"),
                          {i: TOO_LARGE for i, _r in indexed[:split.oversized]})
        messages += split.messages
    return messages
