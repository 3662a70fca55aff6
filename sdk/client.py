"""Prediction logging clients: an asyncio client and a thread-backed sync facade.

``log_prediction`` only appends a tuple to a bounded in-memory buffer and
returns; a background task validates, batches (per model, by size and time),
encodes and produces with ``acks=all``. Nothing here raises into the caller
once the client is started: records that cannot be delivered are counted in
:class:`ClientStats` by reason.

Drop policy: when the buffer holds ``max_buffer`` records, new records are
dropped (``dropped_buffer_full``); records that violate the contract are
dropped (``dropped_invalid``, logged once per field); batches the broker does
not acknowledge within the producer's delivery timeout are dropped
(``dropped_send_failed``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sdk.record import RecordError, validate_record
from sdk.wire import encode_rows, record_row

log = logging.getLogger("fleetwatch.sdk")

DEFAULT_TOPIC = "fw.predictions"


@dataclass
class ClientStats:
    """Counters of a client's life (records, not messages)."""

    accepted: int = 0
    sent: int = 0
    dropped_buffer_full: int = 0
    dropped_invalid: int = 0
    dropped_send_failed: int = 0

    @property
    def dropped(self) -> int:
        return self.dropped_buffer_full + self.dropped_invalid + self.dropped_send_failed


class _Core:
    """Buffer + batching producer shared by both clients; runs on one event loop."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        max_buffer: int,
        batch_size: int,
        linger_ms: float,
        compression_type: str | None,
        enable_idempotence: bool,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.max_buffer = max_buffer
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000.0
        self.compression_type = compression_type
        self.enable_idempotence = enable_idempotence
        self.buffer: collections.deque[dict[str, Any]] = collections.deque()
        self.stats = ClientStats()
        self._producer = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._logged_fields: set[str] = set()

    def append(self, record: dict[str, Any]) -> bool:
        if len(self.buffer) >= self.max_buffer:
            self.stats.dropped_buffer_full += 1
            return False
        self.buffer.append(record)
        self.stats.accepted += 1
        return True

    async def start(self) -> None:
        from aiokafka import AIOKafkaProducer  # imported lazily: keeps `import sdk` light

        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap_servers,
            acks="all",
            compression_type=self.compression_type,
            enable_idempotence=self.enable_idempotence,
            linger_ms=5,
        )
        await self._producer.start()
        self._task = asyncio.create_task(self._run(), name="fleetwatch-sdk-flusher")

    async def _run(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.linger_s)
            await self.flush()

    def _take_batches(self) -> dict[str, list[list]]:
        by_model: dict[str, list[list]] = {}
        while self.buffer:
            data = self.buffer.popleft()
            try:
                record = validate_record(data)
            except RecordError as exc:
                self.stats.dropped_invalid += 1
                if exc.field not in self._logged_fields:
                    self._logged_fields.add(exc.field)
                    log.warning("dropping invalid prediction record: %s", exc)
                continue
            by_model.setdefault(record.model_id, []).append(record_row(record))
        return by_model

    async def flush(self) -> None:
        """Produce everything buffered so far and wait for the broker's acknowledgements."""
        if self._producer is None:
            return
        sends = []
        for model_id, rows in self._take_batches().items():
            key = model_id.encode()
            for i in range(0, len(rows), self.batch_size):
                chunk = rows[i : i + self.batch_size]
                sends.append((len(chunk), self._send(key, encode_rows(model_id, chunk))))
        for n, outcome in zip(
            (n for n, _ in sends),
            await asyncio.gather(*(c for _, c in sends), return_exceptions=True),
            strict=True,
        ):
            if isinstance(outcome, BaseException):
                self.stats.dropped_send_failed += n
                log.warning("dropping %d records the broker did not acknowledge: %r", n, outcome)
            else:
                self.stats.sent += n

    async def _send(self, key: bytes, value: bytes) -> None:
        await self._producer.send_and_wait(self.topic, value=value, key=key)

    async def close(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            await self.flush()
        if self._producer is not None:
            with contextlib.suppress(Exception):
                await self._producer.stop()
            self._producer = None


def _record(
    model_id: str,
    features: Mapping[str, Any],
    model_version: str,
    prediction_id: str | None,
    event_time: float | None,
    score: float | None,
    class_probabilities: Mapping[str, float] | None,
    predicted_label: Any,
    slices: Mapping[str, str] | None,
    latency_ms: float | None,
) -> dict[str, Any]:
    return {
        "model_id": model_id,
        "model_version": model_version,
        "prediction_id": prediction_id if prediction_id is not None else uuid.uuid4().hex,
        "event_time": event_time if event_time is not None else time.time(),
        "features": features,
        "score": score,
        "class_probabilities": class_probabilities,
        "predicted_label": predicted_label,
        "slices": slices,
        "latency_ms": latency_ms,
    }


class _LoggingMixin:
    _core: _Core

    @property
    def stats(self) -> ClientStats:
        """Counters: accepted, sent and dropped records by reason."""
        return self._core.stats

    def log_prediction(
        self,
        model_id: str,
        features: Mapping[str, Any],
        *,
        model_version: str = "0",
        prediction_id: str | None = None,
        event_time: float | None = None,
        score: float | None = None,
        class_probabilities: Mapping[str, float] | None = None,
        predicted_label: Any = None,
        slices: Mapping[str, str] | None = None,
        latency_ms: float | None = None,
    ) -> bool:
        """Buffer one prediction for delivery; returns at once and never raises.

        Parameters are the fields of :class:`sdk.record.PredictionRecord`;
        ``prediction_id`` defaults to a random UUID and ``event_time`` to now
        (Unix seconds).

        Returns
        -------
        bool
            False if the record was dropped because the buffer is full.
        """
        try:
            return self._core.append(
                _record(
                    model_id,
                    features,
                    model_version,
                    prediction_id,
                    event_time,
                    score,
                    class_probabilities,
                    predicted_label,
                    slices,
                    latency_ms,
                )
            )
        except Exception:  # never raise into the model server
            self._core.stats.dropped_invalid += 1
            return False


class AsyncClient(_LoggingMixin):
    """Prediction logger for asyncio model servers.

    Parameters
    ----------
    bootstrap_servers : str
        Kafka bootstrap servers, ``host:port[,host:port]``.
    topic : str
        Predictions topic.
    max_buffer : int
        Records held in memory at most; beyond it new records are dropped.
    batch_size : int
        Records per Kafka message at most.
    linger_ms : float
        How long records wait in the buffer before a batch is sent.
    compression_type : str or None
        Kafka compression (``"gzip"``, or ``"lz4"``/``"zstd"`` when installed).
    enable_idempotence : bool
        Kafka idempotent producer (off by default: not every broker supports it).

    Examples
    --------
    >>> async def serve():                                   # doctest: +SKIP
    ...     async with AsyncClient("localhost:9092") as fw:
    ...         fw.log_prediction("fraud-v2", {"amount": 12.5}, score=0.07)
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str = DEFAULT_TOPIC,
        *,
        max_buffer: int = 100_000,
        batch_size: int = 1_000,
        linger_ms: float = 100.0,
        compression_type: str | None = None,
        enable_idempotence: bool = False,
    ) -> None:
        self._core = _Core(
            bootstrap_servers,
            topic,
            max_buffer,
            batch_size,
            linger_ms,
            compression_type,
            enable_idempotence,
        )

    async def start(self) -> None:
        """Connect the producer and start the background flusher.

        Raises
        ------
        aiokafka.errors.KafkaConnectionError
            If the broker cannot be reached at start (the only time this client raises).
        """
        await self._core.start()

    async def flush(self) -> None:
        """Deliver everything buffered so far; never raises."""
        with contextlib.suppress(Exception):
            await self._core.flush()

    async def close(self) -> None:
        """Flush, then stop the producer; never raises."""
        await self._core.close()

    async def __aenter__(self) -> AsyncClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Client(_LoggingMixin):
    """Prediction logger for synchronous (thread-based) model servers.

    Runs an :class:`AsyncClient` core on its own event loop in a daemon thread.
    Takes the same parameters as :class:`AsyncClient`.

    Examples
    --------
    >>> with Client("localhost:9092") as fw:                # doctest: +SKIP
    ...     fw.log_prediction("churn", {"tenure": 14, "plan": "pro"}, score=0.31)
    """

    def __init__(self, bootstrap_servers: str, topic: str = DEFAULT_TOPIC, **kwargs: Any) -> None:
        self._async = AsyncClient(bootstrap_servers, topic, **kwargs)
        self._core = self._async._core
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fleetwatch-sdk", daemon=True
        )
        self._started = False

    def _call(self, coro, timeout: float | None):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def start(self, timeout: float = 30.0) -> None:
        """Start the background thread and connect; raises only if the broker is unreachable."""
        self._thread.start()
        self._call(self._async.start(), timeout)
        self._started = True

    def flush(self, timeout: float = 60.0) -> None:
        """Block until everything buffered so far is delivered (or dropped); never raises."""
        if self._started:
            with contextlib.suppress(Exception):
                self._call(self._async.flush(), timeout)

    def close(self, timeout: float = 60.0) -> None:
        """Flush, stop the producer and the thread; never raises."""
        if self._started:
            self._started = False
            with contextlib.suppress(Exception):
                self._call(self._async.close(), timeout)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)

    def __enter__(self) -> Client:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
