"""The client's background worker: a daemon thread running its own event loop
with one Kafka producer (``acks=all``).

It connects with exponential backoff (the broker may be down when the model
server starts), then every few milliseconds drains the buffer when a batch is
full or ``linger_ms`` has passed, builds messages (:mod:`sdk.batching`) and
produces them, waiting for the acknowledgements before the next drain: while
the broker is slow or down, new records wait in the bounded buffer, and
beyond it are dropped (:mod:`sdk.client` documents the policy).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from sdk.batching import Batcher, Message
from sdk.buffer import Buffer
from sdk.stats import CLOSED, INVALID, SEND_FAILED, ClientStats, StreamStats

log = logging.getLogger("fleetwatch.sdk")

COMPRESSION_TYPES = ("gzip", "snappy", "lz4", "zstd")
_POLL_SECONDS = 0.01
_BACKOFF_MAX_SECONDS = 5.0
MAX_NESTED_CALLS = 16
"""Calls into the worker one thread may wait in at once: a signal handler that calls
``flush`` while the thread already waits in a flush nests a second wait inside the first, and
signals that keep arriving nest deeper. Past this depth a call returns False at once, so the
nesting never reaches the interpreter's recursion limit (whose error, raised inside a lock's
bookkeeping, could leave the lock held)."""
_RETRY_BACKOFF_MS = 500  # while the broker is down: aiokafka retries (and logs) twice a second, not ten times


def resolve_compression(name: str | None) -> str | None:
    """The Kafka compression codec to use.

    Parameters
    ----------
    name : str or None
        ``"auto"``: lz4 when its codec (``cramjam``, the ``sdk-fast`` extra) is
        installed, else gzip; one of :data:`COMPRESSION_TYPES`; or None.

    Raises
    ------
    ValueError
        If the codec is unknown, or its Python package is not installed.
    """
    from aiokafka import codec  # imported lazily: keeps `import sdk` light

    available = {"gzip": codec.has_gzip, "snappy": codec.has_snappy, "lz4": codec.has_lz4,
                 "zstd": codec.has_zstd}
    if name == "auto":
        return "lz4" if codec.has_lz4() else "gzip"
    if name is not None and name not in available:
        raise ValueError(f"compression_type must be 'auto', None or one of {COMPRESSION_TYPES}")
    if name is not None and not available[name]():
        raise ValueError(f"compression {name!r} needs cramjam: pip install 'fleetwatch[sdk-fast]'")
    return name


@dataclass(frozen=True)
class Delivery:
    """Where and how the worker produces."""

    bootstrap_servers: str
    topic: str
    labels_topic: str
    linger_ms: float
    batch_size: int
    max_message_bytes: int
    compression_type: str | None
    enable_idempotence: bool
    delivery_timeout_ms: int


class Worker:
    """Delivers a :class:`~sdk.buffer.Buffer` to Kafka from a daemon thread.

    Parameters
    ----------
    buffer : Buffer
    stats : ClientStats
        Updated in place (by this thread only, except drop markers).
    batcher : Batcher
    delivery : Delivery
    """

    def __init__(self, buffer: Buffer, stats: ClientStats, batcher: Batcher, delivery: Delivery) -> None:
        self.buffer = buffer
        self.stats = stats
        self.batcher = batcher
        self.delivery = delivery
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="fleetwatch-sdk", daemon=True)
        self._producer = None
        self._connected = asyncio.Event()
        self._stopping = asyncio.Event()
        self._delivering = asyncio.Lock()  # one drain in flight at a time
        self._deliveries: set[asyncio.Task] = set()
        self._task: asyncio.Task | None = None
        self._nesting = threading.local()  # per thread, the calls it waits in (call())

    # -- called from other threads -----------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        """Run ``coro`` on the worker's loop."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float) -> bool:
        """Run ``coro`` on the worker's loop and wait at most ``timeout`` seconds.
        Safe in a signal handler: takes no lock that the interrupted code may hold.

        Returns
        -------
        bool
            True if ``coro`` finished in time without an exception; False at once when the
            calling thread already waits in :data:`MAX_NESTED_CALLS` calls (signal handlers
            nesting flushes).
        """
        depth = getattr(self._nesting, "depth", 0)
        if (depth >= MAX_NESTED_CALLS or not self.thread.is_alive()
                or threading.current_thread() is self.thread):
            coro.close()
            return False
        self._nesting.depth = depth + 1
        try:
            future = self.submit(coro)
            try:
                future.result(timeout)
            except Exception:  # timed out, cancelled, or the loop stopped
                future.cancel()
                return False
            return True
        finally:
            self._nesting.depth = depth

    # -- on the worker's loop ----------------------------------------------------------
    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._task = self.loop.create_task(self._run(), name="fleetwatch-sdk-worker")
        self.loop.run_forever()
        self.loop.close()

    async def _run(self) -> None:
        if not await self._connect():
            return
        last = time.monotonic()
        batch_size = self.delivery.batch_size
        linger = self.delivery.linger_ms / 1000.0
        rows, chunks, labels = self.buffer.rows, self.buffer.chunks, self.buffer.labels
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), min(linger, _POLL_SECONDS))
            self.buffer.collect_drops(self.stats)
            if self._delivering.locked():  # the last drain is not acknowledged yet: records wait
                continue
            full = len(rows) >= batch_size or len(chunks) > 0 or len(labels) >= batch_size
            if full or (time.monotonic() - last >= linger and (rows or labels)):
                self._deliver_soon()
                last = time.monotonic()

    async def _connect(self) -> bool:
        """Start the producer, retrying with exponential backoff until it connects
        (True) or the client closes (False)."""
        from aiokafka import AIOKafkaProducer  # imported lazily: keeps `import sdk` light

        d = self.delivery
        delay = 0.1
        while not self._stopping.is_set():
            producer = AIOKafkaProducer(
                bootstrap_servers=d.bootstrap_servers, acks="all", compression_type=d.compression_type,
                enable_idempotence=d.enable_idempotence, linger_ms=5, retry_backoff_ms=_RETRY_BACKOFF_MS,
                request_timeout_ms=d.delivery_timeout_ms, max_request_size=d.max_message_bytes + 65_536,
            )
            try:
                await producer.start()
            except Exception as exc:  # the broker is unreachable: records wait in the buffer
                log.warning("fleetwatch SDK cannot reach Kafka at %s (%s); retrying in %.1f s",
                            d.bootstrap_servers, exc, delay)
                with contextlib.suppress(Exception):
                    await producer.stop()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
                delay = min(delay * 2, _BACKOFF_MAX_SECONDS)
                continue
            self._producer = producer
            self._connected.set()
            return True
        return False

    def _deliver_soon(self) -> asyncio.Task:
        """A task that drains the buffer and delivers it, after the drain in flight."""
        task = self.loop.create_task(self._delivery())
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)
        return task

    async def _delivery(self) -> None:
        async with self._delivering:
            await self._deliver()

    async def flush(self) -> None:
        """Deliver everything buffered before this call (waits until connected).
        Cancelling the wait does not cancel the delivery, so every record is
        still counted once as sent or dropped."""
        await self._connected.wait()
        await asyncio.shield(self._deliver_soon())

    async def _deliver(self) -> None:
        rows, chunks, labels = self.buffer.drain()
        preds, labs = self.stats, self.stats.labels
        n_preds = len(rows) + sum(map(len, chunks))
        preds.accepted += n_preds
        labs.accepted += len(labels)
        try:
            sends = [(self.delivery.topic, preds, m) for m in self.batcher.predictions(rows, chunks, preds)]
            sends += [(self.delivery.labels_topic, labs, m) for m in self.batcher.labels(labels, labs)]
        except Exception:  # a bug must not stop delivery: count and log it
            log.exception("fleetwatch SDK could not batch %d records", n_preds + len(labels))
            preds.add_dropped(INVALID, n_preds)
            labs.add_dropped(INVALID, len(labels))
            return
        for _topic, stream, (_key, _value, n) in sends:
            stream.buffered += n  # in flight until acknowledged or failed
        failed = await asyncio.gather(*(self._send(*send) for send in sends))
        if sum(failed):
            log.warning("fleetwatch SDK dropped %d records the broker did not acknowledge", sum(failed))

    async def _send(self, topic: str, stream: StreamStats, message: Message) -> int:
        """Produce one message and count its records as sent or failed; returns the
        records that failed. If cancelled (close ran out of time), they stay in flight."""
        key, value, n = message
        try:
            await self._producer.send_and_wait(topic, value=value, key=key)
        except Exception:
            stream.buffered -= n
            stream.add_dropped(SEND_FAILED, n)
            return n
        stream.buffered -= n
        stream.sent += n
        return 0

    async def shutdown(self, timeout: float) -> None:
        """Deliver what is buffered within ``timeout`` seconds, count the rest as
        dropped (``closed``), stop the producer and the loop."""
        deadline = time.monotonic() + timeout
        self._stopping.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.flush(), max(timeout, 0.0))
        if self._producer is not None:  # resolves the sends in flight: acknowledged or failed
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._producer.stop(), max(deadline - time.monotonic(), 0.5))
        tasks = [t for t in (self._task, *self._deliveries) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._count_unsent()
        self.loop.call_soon(self.loop.stop)

    def _count_unsent(self) -> None:
        self.buffer.collect_drops(self.stats)
        self.buffer.discard(self.stats)
        for stream in (self.stats, self.stats.labels):
            stream.add_dropped(CLOSED, stream.buffered)
            stream.buffered = 0
