"""Broker restart: the broker is stopped (SIGTERM) or killed (SIGKILL) mid-stream and
started again on the same port with the same storage; the aggregator (a child process,
never restarted) and the SDK client reconnect and resume, and nothing is lost or
double-counted.

The embedded broker's memory storage dies with the process, so these tests run Tansu
on S3 storage (an S3-compatible server, moto's, as another child process), which
outlives the broker like a real deployment's disk does.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter

from aiokafka import AIOKafkaConsumer, TopicPartition

from sdk.client import AsyncClient
from sdk.wire import decode_batch
from service.kafka import ensure_topics
from service.profiles.keys import partition_key
from sketches.profile import WindowProfile
from tests.conftest import wait_for
from tests.processes import role_process
from tests.roles import window_counts
from tests.test_profiles_crash_safety import (
    MODELS,
    WINDOW,
    all_windows_stored,
    assert_matches,
    stop,
    workload,
)

OUTAGE_SECONDS = 5


async def redis_offsets(store, settings) -> dict[int, int]:
    """The aggregator's authoritative next offset per partition that has one (its Redis
    checkpoint)."""
    out = {}
    for p in range(settings.topic_partitions):
        v = await store.r.hget(partition_key(settings.predictions_topic, p), "offset")
        if v is not None:
            out[p] = int(v)
    return out


async def aggregated(store, settings) -> int:
    """Records in Redis: in closed windows, plus in open windows' checkpointed partial profiles."""
    total = 0
    for m in MODELS:
        total += sum((await window_counts(store, m)).values())
    for p in range(settings.topic_partitions):
        for name, value in (await store.r.hgetall(partition_key(settings.predictions_topic, p))).items():
            if name.startswith(b"open:"):
                total += WindowProfile.from_bytes(value).count
    return total


async def group_offsets(settings) -> dict[int, int]:
    """The aggregator group's committed Kafka offsets per partition (kept by the broker)."""
    # A consumer that never subscribes only fetches offsets; it does not join the group.
    # (Not AIOKafkaAdminClient.list_consumer_group_offsets: aiokafka cannot decode
    # Tansu 0.6's answer to the OffsetFetch version it sends.)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap,
                                group_id=settings.aggregator_group, enable_auto_commit=False)
    await consumer.start()
    try:
        out = {}
        for p in range(settings.topic_partitions):
            offset = await consumer.committed(TopicPartition(settings.predictions_topic, p))
            if offset is not None:
                out[p] = offset
        return out
    finally:
        await consumer.stop()


async def prediction_ids_in_log(settings, timeout: float = 30.0) -> Counter:
    """How often each prediction id occurs in the predictions topic, read from offset 0
    up to the high watermark each fetch reports (Tansu 0.6's ListOffsets on S3 storage
    under-reports the log end, so ``end_offsets`` is not used)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(settings.predictions_topic, p) for p in range(settings.topic_partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ids: Counter = Counter()

        async def read_to_end() -> bool:
            for messages in (await consumer.getmany(timeout_ms=200)).values():
                for m in messages:
                    ids.update(r.prediction_id for r in decode_batch(m.value).records)
            for tp in tps:
                high = consumer.highwater(tp)
                if high is None or await consumer.position(tp) < high:
                    return False
            return True

        await wait_for(read_to_end, timeout=timeout, interval=0)
        return ids
    finally:
        await consumer.stop()


async def test_broker_restart_consumers_reconnect_and_resume(settings, store, restartable_broker, tmp_path):
    """The broker is stopped (SIGTERM), later killed (SIGKILL), each time for
    OUTAGE_SECONDS while the SDK keeps logging, and started again."""
    broker = restartable_broker
    settings = settings.model_copy(update={
        # The producer is not idempotent: batches retried after an outage can land after
        # later ones; a lateness covering the workload's event-time span keeps that
        # reordering from making records late, so windows close here only when idle.
        "kafka_bootstrap": f"127.0.0.1:{broker.port}", "allowed_lateness_seconds": 3_600,
        # Longer than an outage plus the producer's re-send: windows must not
        # idle-close before the records buffered during the outage arrive (the
        # aggregator's own guard, BROKER_SILENCE_SECONDS, also holds them back for
        # idle_close_seconds after the broker answers again); the last windows
        # close this long after the last record.
        "idle_close_seconds": 25.0, "checkpoint_interval_seconds": 0.3,
        "kafka_session_timeout_ms": 6000, "kafka_heartbeat_interval_ms": 1000,
    })
    await ensure_topics(settings)
    records = workload(15_000, windows=3, seed=11)
    # In event-time order: logged with the broker up, down (SIGTERM), up, down (SIGKILL), up.
    parts = [records[i:i + 3_000] for i in range(0, len(records), 3_000)]
    outages = {1: signal.SIGTERM, 3: signal.SIGKILL}
    aggregator = role_process(settings, "aggregate", tmp_path / "aggregator.log")
    client = AsyncClient(settings.kafka_bootstrap, settings.predictions_topic, batch_size=200,
                         linger_ms=50, delivery_timeout_ms=60_000)
    await client.start()

    def log(rs) -> None:
        for r in rs:
            assert client.log_prediction(r.model_id, r.features, model_version=r.model_version,
                                         prediction_id=r.prediction_id, event_time=r.event_time,
                                         score=r.score)

    async def checkpointed_and_committed() -> bool:
        """All records logged so far are checkpointed in Redis, and the Kafka group
        offsets are committed up to the Redis offsets."""
        if await aggregated(store, settings) != logged:
            return False
        offsets = await redis_offsets(store, settings)
        return bool(offsets) and await group_offsets(settings) == offsets

    try:
        committed_before: dict[int, int] = {}
        logged = 0
        for i, part in enumerate(parts):
            sig = outages.get(i)
            if sig is None:
                log(part)
                logged += len(part)
                continue
            assert await client.flush(60)  # acknowledged: nothing in flight when the broker goes
            assert client.stats.sent == logged
            await wait_for(checkpointed_and_committed, timeout=30)
            committed_before = await group_offsets(settings)
            if sig == signal.SIGTERM:
                broker.stop()
            else:
                broker.kill()
            assert broker.proc.returncode is not None
            # The outage: the model server keeps logging; records wait in the SDK's buffer.
            for s in (part[j::10] for j in range(10)):
                log(s)
                await asyncio.sleep(OUTAGE_SECONDS / 10)
            logged += len(part)
            broker.start()  # same port, same bucket
            # The group's committed offsets survived the restart (the aggregator may
            # only have moved them forward since).
            after_restart = await group_offsets(settings)
            assert all(after_restart.get(p, -1) >= o for p, o in committed_before.items())
        assert await client.flush(60)
        stats = client.stats
        assert (stats.accepted, stats.sent, stats.dropped, stats.buffered) == (len(records),) * 2 + (0, 0)

        await wait_for(lambda: all_windows_stored(store, records), timeout=60)
        assert aggregator.poll() is None, "the aggregator died instead of reconnecting"
        await assert_matches(store, records)  # per-window counts (and sketches) exact
        # Each restart really was mid-window: a window open when the broker went got
        # records during the outage, and one of those got more after it.
        windows = [{r.event_time // WINDOW for r in part} for part in parts]
        assert all(windows[i - 1] & windows[i] and windows[i] & windows[i + 1] for i in outages)

        # Each record is in the broker's log exactly once (the part logged before the
        # first restart included).
        ids = await prediction_ids_in_log(settings)
        assert ids == Counter(r.prediction_id for r in records)

        # The aggregator kept committing to the restarted broker: its group offsets
        # caught up with its Redis checkpoint, past where they stood before the last outage.
        await wait_for(checkpointed_and_committed, timeout=30)
        final = await group_offsets(settings)
        assert all(final[p] >= o for p, o in committed_before.items())
        assert sum(final.values()) > sum(committed_before.values())
        assert stop(aggregator) == 0
    finally:
        await client.close(5)
        if aggregator.poll() is None:
            stop(aggregator)
