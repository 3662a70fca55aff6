"""A model's watermark is not movable by a few outliers: records stamped an hour in
the future (accepted: the limit is 24 h) neither close the windows that the model's
real-time records are filling nor those of a backfill of old data, which still close
by watermark."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from aiokafka import AIOKafkaProducer

from sdk.record import PredictionRecord
from sdk.wire import encode_batch
from service import metrics
from service.profiles.checkpoints import PartitionCheckpoint
from service.profiles.partition import PartitionState
from tests.conftest import wait_for
from tests.metric_samples import sample
from tests.roles import running, window_counts

WINDOW = 300
HOUR = 3_600.0


def late() -> float:
    return sample("fleetwatch_records_dead_lettered_total", reason=metrics.LATE)


def aggregated() -> float:
    return sample("fleetwatch_records_aggregated_total")


@pytest.fixture
def wm_settings(settings):
    # Windows close by watermark only (no idle close within the test), 60 s lateness
    # (the default).
    return settings.model_copy(update={"allowed_lateness_seconds": 60, "idle_close_seconds": 600.0})


def batch(model: str, times, prefix: str) -> bytes:
    return encode_batch([PredictionRecord(model, "1", f"{prefix}{i}", float(t), {"x": float(i)})
                         for i, t in enumerate(times)])


async def send(settings, store, values: list[bytes], key: bytes) -> None:
    """Produce ``values`` one by one, each once the previous one is through a checkpoint
    (which closes the windows the watermark has passed), as records trickle in."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
    await producer.start()
    try:
        for v in values:
            md = await producer.send_and_wait(settings.predictions_topic, v, key=key)

            async def checkpointed(md=md) -> bool:
                raw = await store.r.hget(f"fw:agg:{settings.predictions_topic}:{md.partition}", "offset")
                return raw is not None and int(raw) > md.offset

            await wait_for(checkpointed, timeout=30)
    finally:
        await producer.stop()


async def watermark(store, settings, model: str) -> float:
    for p in range(settings.topic_partitions):
        raw = await store.r.hget(f"fw:agg:{settings.predictions_topic}:{p}", f"wm:{model}")
        if raw is not None:
            return float(raw)
    return -math.inf


@pytest.mark.parametrize("future, own_messages", [(1, False), (100, False), (100, True)])
async def test_future_records_do_not_close_the_windows_of_real_time_records(
        wm_settings, store, future, own_messages):
    """Before: one record an hour ahead moved the watermark an hour ahead, and the
    model's real-time records after it were dead-lettered as late (3,000 of 3,000)."""
    settings = wm_settings
    rng = np.random.default_rng(future)
    late0, agg0 = late(), aggregated()
    async with running(settings, store, "aggregator"):
        now = time.time()
        ahead = [now + HOUR + i for i in range(future)]
        if own_messages:
            outliers = [batch("rt", [t], f"f{i}-") for i, t in enumerate(ahead)]
        else:
            outliers = [batch("rt", ahead, "f")]
        await send(settings, store, outliers[:1], b"rt")
        values = []
        rest = np.array_split(np.arange(1, len(outliers)), 30)
        for j in range(30):  # 3,000 real-time records, 0-20 s old when sent
            values.append(batch("rt", time.time() - rng.uniform(0, 20, 100), f"r{j}-"))
            values += [outliers[i] for i in rest[j]]  # the others, interleaved
        await send(settings, store, values, b"rt")
        assert aggregated() - agg0 + late() - late0 == 3_000 + future
        assert late() - late0 == 0
        assert await watermark(store, settings, "rt") <= time.time() + settings.max_clock_skew_seconds


async def test_a_backfill_closes_its_windows_by_watermark_despite_future_records(wm_settings, store):
    """Old data over 12 windows, in order, 100 records a message, with one record an
    hour ahead of now inside a message and a whole message of 100 such records: every
    window but the last ones closes by watermark, exactly, and no record is late."""
    settings = wm_settings
    t0 = 1_700_000_100 - 1_700_000_100 % WINDOW
    rng = np.random.default_rng(3)
    times = np.sort(rng.uniform(t0, t0 + 12 * WINDOW, 6_000))
    future = time.time() + HOUR
    values = []
    for j, chunk in enumerate(np.array_split(times, 60)):
        chunk = list(chunk)
        if j == 20:
            chunk[50] = future  # one future record among real ones
        values.append(batch("bf", chunk, f"b{j}-"))
        if j == 40:
            values.append(batch("bf", [future] * 100, "f"))  # a whole message of them
    expected: dict[int, int] = {}
    for t in times:
        expected[int(t // WINDOW) * WINDOW] = expected.get(int(t // WINDOW) * WINDOW, 0) + 1
    expected[int(times[20 * 100 + 50] // WINDOW) * WINDOW] -= 1  # replaced by the future record
    late0 = late()
    async with running(settings, store, "aggregator"):
        await send(settings, store, values, b"bf")
        closing = sorted(expected)[:10]

        async def ten_windows_closed() -> bool:
            got = await window_counts(store, "bf")
            return all(s in got for s in closing)

        await wait_for(ten_windows_closed, timeout=60)
    got = await window_counts(store, "bf")
    assert {s: got[s] for s in closing} == {s: expected[s] for s in closing}
    assert late() - late0 == 0


def test_the_watermark_and_its_recent_samples_survive_a_checkpoint():
    """What the watermark rule keeps per model is restored from the checkpoint fields
    exactly as written, so a successor replays to the same watermark."""
    state = PartitionState(0, PartitionCheckpoint(epoch=1))
    clock = state.clocks["m"]
    for point in (10.0, 20.0, 5_000.0, 30.0):
        clock.advance(point, 5)
    state.dirty_clocks.add("m")
    fields = {k: (v if isinstance(v, bytes) else str(v).encode()) for k, v in state.updates().items()}
    restored = PartitionState(0, PartitionCheckpoint(epoch=2, fields=fields)).clocks["m"]
    assert (restored.max_event_time, restored.recent) == (clock.max_event_time, clock.recent)
    assert clock.max_event_time == 20.0  # the lower median of (10, 20, 30, 5000): not the outlier
    for point, expected in ((40.0, 30.0), (50.0, 40.0), (5_001.0, 50.0)):
        restored.advance(point, 5)
        assert restored.max_event_time == expected


async def test_future_predictions_do_not_move_the_label_joiners_watermark(settings, store):
    """The joiner's watermark (which parks labels and matures cohorts by age) was the
    latest prediction event time read: one prediction an hour ahead matured every
    cohort of the hour. Now it moves at most to when the message was produced."""
    from service.cohorts.joiner import Joiner
    from service.registry import ModelConfig, PerformanceConfig

    settings = settings.model_copy(update={"labels_topic": settings.predictions_topic + "-labels",
                                           "joiner_group": settings.aggregator_group + "-joiner"})
    await store.put_model_config("j", ModelConfig(tier=1, performance=PerformanceConfig(task="binary")))
    now = time.time()
    times = [now - 10.0 + i * 0.1 for i in range(50)] + [now + HOUR]
    value = encode_batch([PredictionRecord("j", "1", f"p{i}", t, {"x": 1.0}, score=0.5)
                          for i, t in enumerate(times)])
    joiner = Joiner(settings, store)
    async with running(settings, store, "joiner"):
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(settings.predictions_topic, value, key=b"j")
        finally:
            await producer.stop()

        async def joined() -> bool:
            return await joiner.watermark("j") > -math.inf

        await wait_for(joined, timeout=60)
    assert now - 10 < await joiner.watermark("j") <= time.time() + settings.max_clock_skew_seconds
