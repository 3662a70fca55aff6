"""Infrastructure outages: Redis down for 30 s stops consumption (bounded memory)
and nothing is lost when it returns; a hung broker is reconnected to."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable

from service.embedded import kafka_broker, redis_server
from service.kafka import ensure_topics
from service.profiles.store import Store
from tests.conftest import wait_for
from tests.metric_samples import sample
from tests.roles import running
from tests.test_profiles_crash_safety import (
    all_windows_stored,
    assert_matches,
    committed_offsets,
    produce,
    workload,
)

OUTAGE_SECONDS = 30


async def test_redis_outage_pauses_consumption_and_loses_nothing(settings, tmp_path):
    redis = redis_server(tmp_path / "redis")
    redis.start()
    settings = settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{redis.port}/0",
                                           "redis_cluster": False})
    # graceful stop: the AOF is flushed, as on a planned restart or failover
    await outage_loses_nothing(settings, redis.stop, redis.start)


async def outage_loses_nothing(settings, down: Callable[[], None], up: Callable[[], None]) -> None:
    """Aggregate while traffic flows; ``down()`` Redis for :data:`OUTAGE_SECONDS`, then
    ``up()``: nothing was consumed meanwhile, and every record is counted once. Stops Redis
    with ``down`` at the end."""
    settings = settings.model_copy(update={
        "max_poll_records": 1000, "allowed_lateness_seconds": 60, "idle_close_seconds": 5.0,
    })
    store = Store(settings.redis_url, settings.redis_cluster)
    records = workload(60_000, windows=3, seed=5)
    first, second = records[:20_000], records[20_000:]
    try:
        await ensure_topics(settings)
        async with running(settings, store, "aggregator"):
            await produce(settings, first)

            async def checkpointed() -> bool:
                return await committed_offsets(store, settings) > 0

            await wait_for(checkpointed, timeout=60)
            # Traffic keeps flowing, before, during and after the outage.
            slices = [second[i:i + 1000] for i in range(0, len(second), 1000)]

            async def traffic() -> None:
                for s in slices:
                    await produce(settings, s)
                    await asyncio.sleep(0.8)

            producer = asyncio.create_task(traffic())
            down()
            t_down = time.monotonic()
            await asyncio.sleep(5)  # the outage itself: let the aggregator hit the wall
            stalled_at = sample("fleetwatch_records_aggregated_total")
            errors_at = sample("fleetwatch_redis_errors_total")
            await asyncio.sleep(OUTAGE_SECONDS - (time.monotonic() - t_down))
            # Nothing consumed while Redis was down beyond what was in flight.
            assert sample("fleetwatch_records_aggregated_total") == stalled_at
            assert sample("fleetwatch_redis_errors_total") > errors_at
            up()
            await producer
            await wait_for(lambda: all_windows_stored(store, records), timeout=120)
        await assert_matches(store, records)
    finally:
        await store.close()
        down()


async def test_broker_hang_then_resume_loses_and_double_counts_nothing(settings, store, tmp_path):
    """The broker stops answering for 20 s (SIGSTOP: a hung or partitioned broker;
    the embedded broker keeps its log in memory, so a kill would lose the log);
    the aggregator's connections time out, it reconnects and resumes."""
    broker = kafka_broker(tmp_path / "broker")
    broker.start()
    settings = settings.model_copy(update={
        "kafka_bootstrap": f"127.0.0.1:{broker.port}", "allowed_lateness_seconds": 60,
        "idle_close_seconds": 25.0, "kafka_session_timeout_ms": 6000, "kafka_heartbeat_interval_ms": 1000,
    })
    records = workload(20_000, windows=2, seed=6)
    try:
        await ensure_topics(settings)
        async with running(settings, store, "aggregator"):
            await produce(settings, records[:10_000])

            async def checkpointed() -> bool:
                return await committed_offsets(store, settings) > 0

            await wait_for(checkpointed, timeout=60)
            broker.proc.send_signal(signal.SIGSTOP)
            await asyncio.sleep(20)  # the hang itself
            broker.proc.send_signal(signal.SIGCONT)
            await produce(settings, records[10_000:])
            await wait_for(lambda: all_windows_stored(store, records), timeout=120)
        await assert_matches(store, records)
    finally:
        broker.proc.send_signal(signal.SIGCONT)
        broker.stop()
