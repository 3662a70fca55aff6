"""Kafka helpers: topic creation at start-up, dead letters."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import time

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    RecordTooLargeError,
    TopicAlreadyExistsError,
)
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential

from service import metrics
from service.settings import Settings

log = logging.getLogger("fleetwatch.kafka")


async def ensure_topics(settings: Settings, timeout: float = 60.0) -> None:
    """Create the predictions, dead-letter and labels topics with ``topic_partitions``
    partitions if they do not exist, retrying while the broker starts.

    Raises
    ------
    aiokafka.errors.KafkaConnectionError
        If the broker is unreachable for ``timeout`` seconds.
    """
    async for attempt in AsyncRetrying(
        retry=retry_if_exception_type(KafkaConnectionError),
        wait=wait_exponential(multiplier=0.1, max=2),
        stop=stop_after_delay(timeout),
        reraise=True,
    ):
        with attempt:
            admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
            await admin.start()
            try:
                existing = set(await admin.list_topics())
                wanted = [settings.predictions_topic, settings.dead_letter_topic, settings.labels_topic]
                new = [
                    NewTopic(t, num_partitions=settings.topic_partitions, replication_factor=1)
                    for t in wanted
                    if t not in existing
                ]
                if new:
                    with contextlib.suppress(TopicAlreadyExistsError):
                        await admin.create_topics(new)
                    log.info("created topics %s", [t.name for t in new])
            finally:
                await admin.close()


def produced_at(timestamp_ms: int | None, now: float) -> float:
    """When a message was produced (Unix seconds): its broker timestamp (CreateTime or
    LogAppendTime, ms), never later than ``now``; ``now`` when it has none.

    Examples
    --------
    >>> produced_at(1_700_000_000_000, 1_800_000_000.0), produced_at(-1, 5.0)
    (1700000000.0, 5.0)
    >>> produced_at(1_900_000_000_000, 1_800_000_000.0)  # a producer clock ahead
    1800000000.0
    """
    return min(timestamp_ms / 1000, now) if (timestamp_ms or 0) > 0 else now


def key_error(key: bytes | None, model_id: str) -> tuple[str, str] | None:
    """Why a message of ``model_id`` cannot be accepted with this Kafka ``key``: a
    ``(reason, detail)`` pair, or None when the key is the model id (UTF-8).

    Every message of a model must be keyed by its model id, so that the model's
    records share one partition: a keyless or otherwise keyed message lands on another
    partition, whose aggregator builds its own half of the model's window, and the
    halves overwrite each other when they close.

    Examples
    --------
    >>> key_error(b"fraud", "fraud") is None
    True
    >>> key_error(None, "fraud")[0], key_error(b"churn", "fraud")[0]
    ('missing_key', 'key_mismatch')
    """
    if key is None:
        return metrics.MISSING_KEY, f"message has no key; it must be the model_id {model_id[:300]!r}"
    if key != model_id.encode():
        return metrics.KEY_MISMATCH, f"message key is not the model_id {model_id[:300]!r}"
    return None


class DeadLetters:
    """Sends rejected messages (or the records of one) to the dead-letter topic.

    Every dead letter carries ``reason`` and ``detail`` headers (and ``source``,
    ``topic:partition:offset`` of the message it came from, when known) and is
    counted under its reason in ``fleetwatch_records_dead_lettered_total``. One that
    would exceed ``dead_letter_max_bytes`` (the producer refuses requests over 1 MiB)
    is truncated to fit: its value (then its key) is cut, and headers ``truncated``
    (``value`` or ``key,value``), ``original_size`` (bytes of the value) and ``sha256``
    (hex digest of the whole original value) tell what it was; the original stays in
    the source topic at ``source`` for the topic's retention.

    Sends run in the background; :meth:`flush` waits for all of them (call it before
    moving offsets). A failed send is counted (``fleetwatch_dead_letter_send_failures_total``)
    and logged; retriable failures (broker unavailable, timeouts) are retried for up
    to ``dead_letter_retry_seconds``, a dead letter the broker refuses as too large is
    cut further, and one that still cannot be sent is counted in
    ``fleetwatch_dead_letters_lost_total`` and logged as an error. No send's
    exception is left unretrieved.

    Parameters
    ----------
    producer : AIOKafkaProducer
        A started producer.
    settings : Settings
        ``dead_letter_topic``, ``dead_letter_max_bytes``, ``dead_letter_retry_seconds``.
    """

    def __init__(self, producer: AIOKafkaProducer, settings: Settings) -> None:
        self.producer = producer
        self.topic = settings.dead_letter_topic
        self.max_bytes = settings.dead_letter_max_bytes
        self.retry_seconds = settings.dead_letter_retry_seconds
        self._pending: set[asyncio.Task] = set()

    def send(self, key: bytes | None, value: bytes | None, reason: str, detail: str, n: int,
             source: str | None = None) -> None:
        """Dead-letter one message (``n`` records under ``reason``) without waiting."""
        metrics.DEAD_LETTERED.labels(reason=reason).inc(n)
        log.warning("dead-lettering %d record(s): %s: %s", n, reason, detail[:300])
        headers = [("reason", reason.encode()), ("detail", detail[:10_000].encode())]
        if source is not None:
            headers.append(("source", source.encode()))
        task = asyncio.ensure_future(self._deliver(key, value or b"", headers))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        """Wait until every dead letter sent so far is acknowledged (or counted lost)."""
        while self._pending:
            await asyncio.gather(*list(self._pending))
        await self.producer.flush()

    async def _deliver(self, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        budget = self.max_bytes
        deadline = time.monotonic() + self.retry_seconds
        for attempt in itertools.count():
            k, v, h = fit(key, value, headers, budget)
            try:
                await (await self.producer.send(self.topic, value=v, key=k, headers=h))
                if len(h) > len(headers):
                    metrics.DEAD_LETTERS_TRUNCATED.inc()
                return
            except Exception as exc:  # counted and logged, never left unretrieved
                metrics.DEAD_LETTER_SEND_FAILURES.inc()
                too_large = isinstance(exc, MessageSizeTooLargeError | RecordTooLargeError)
                retriable = getattr(exc, "retriable", False) or isinstance(exc, KafkaTimeoutError)
                retry = (too_large and budget > 1_024) or (retriable and time.monotonic() < deadline)
                log.warning("dead letter send failed (%s: %s)%s", type(exc).__name__, exc,
                            "; retrying" if retry else "")
                if not retry:
                    metrics.DEAD_LETTERS_LOST.inc()
                    log.error("dead letter lost: reason %s, %d bytes", dict(headers)["reason"].decode(),
                              len(value))
                    return
                if too_large:
                    budget //= 2  # the broker's limit is below ours
                else:
                    await asyncio.sleep(min(0.1 * 2 ** attempt, 5.0))


def fit(key: bytes | None, value: bytes, headers: list[tuple[str, bytes]], max_bytes: int
        ) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    """``(key, value, headers)`` cut to at most ``max_bytes`` as Kafka record (v2 format)
    estimates it: unchanged if they fit, else the detail header, then the value, then
    the key are shortened, and ``truncated``, ``original_size`` and ``sha256`` headers
    describe the original value.

    Examples
    --------
    >>> k, v, h = fit(b"m", b"x" * 5_000, [("reason", b"late")], 2_000)
    >>> len(v) < 2_000, dict(h)["original_size"], dict(h)["truncated"]
    (True, b'5000', b'value')
    >>> fit(b"m", b"small", [("reason", b"late")], 2_000)
    (b'm', b'small', [('reason', b'late')])
    """
    size = DefaultRecordBatchBuilder.estimate_size_in_bytes
    if size(key, value, headers) <= max_bytes:
        return key, value, headers
    headers = [(n, v[:1_000] if n == "detail" else v) for n, v in headers]
    described = [*headers, ("truncated", b"value"), ("original_size", str(len(value)).encode()),
                 ("sha256", hashlib.sha256(value).hexdigest().encode())]
    slack = 16  # the varint lengths of the record, key and value grow with them
    room = max_bytes - size(key, b"", described) - slack
    if room >= 0:
        return key, value[:room], described
    described[-3] = ("truncated", b"key,value")
    room = max(max_bytes - size(b"", b"", described) - slack, 0)
    return (None if key is None else key[:room]), b"", described
