"""Exactly-once in effect: aggregators SIGKILLed at random moments, scaled out and
rebalanced, or stopped with SIGTERM lose and double-count nothing."""

from __future__ import annotations

import asyncio
import random
import signal
import time
import urllib.request
from collections import Counter

import numpy as np
import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from sdk.record import PredictionRecord
from sdk.wire import encode_batch
from service.embedded import free_port
from service.kafka import ensure_topics
from service.profiles.keys import partition_key
from sketches.profile import WindowProfile
from tests.conftest import wait_for
from tests.processes import role_process
from tests.roles import window_counts

WINDOW = 300
T0 = 1_700_000_100 - 1_700_000_100 % WINDOW
MODELS = ("fraud", "churn", "ranker", "ads")


@pytest.fixture
def proc_settings(settings):
    return settings.model_copy(update={
        "allowed_lateness_seconds": 60, "idle_close_seconds": 2.0,
        "checkpoint_interval_seconds": 0.3, "kafka_session_timeout_ms": 3000,
        "kafka_heartbeat_interval_ms": 500,
    })


def workload(n: int, windows: int, seed: int = 0) -> list[PredictionRecord]:
    """n records over `windows` windows, in event-time order with +-30 s jitter."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(T0, T0 + windows * WINDOW, n)) + rng.uniform(-30, 30, n)
    t = np.clip(t, T0, T0 + windows * WINDOW - 1)
    x = rng.lognormal(0, 1, n)
    cats = rng.choice(["a", "b", "c", "d"], n)
    return [
        PredictionRecord(MODELS[i % len(MODELS)], "1", f"p{i}", float(t[i]),
                         {"x": float(x[i]), "c": str(cats[i])}, score=float(x[i] / (1 + x[i])))
        for i in range(n)
    ]


async def produce(settings, records: list[PredictionRecord], batch: int = 500) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        by_model: dict[str, list[PredictionRecord]] = {}
        for r in records:
            by_model.setdefault(r.model_id, []).append(r)
        sends = []
        for model, rs in by_model.items():
            for i in range(0, len(rs), batch):
                sends.append(await producer.send(settings.predictions_topic,
                                                 encode_batch(rs[i:i + batch]), key=model.encode()))
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


def by_window(records: list[PredictionRecord]) -> dict[tuple[str, int], list[PredictionRecord]]:
    """The records of each (model, window start), in their order (one pass)."""
    out: dict[tuple[str, int], list[PredictionRecord]] = {}
    for r in records:
        out.setdefault((r.model_id, int(r.event_time // WINDOW) * WINDOW), []).append(r)
    return out


def expected_profiles(records: list[PredictionRecord]) -> dict[str, dict[int, WindowProfile]]:
    out: dict[str, dict[int, WindowProfile]] = {}
    for (model, start), rs in by_window(records).items():
        p = out.setdefault(model, {})[start] = WindowProfile(model, start, WINDOW)
        p.add_records(rs)
    return out


async def committed_offsets(store, settings) -> int:
    total = 0
    for p in range(settings.topic_partitions):
        v = await store.r.hget(partition_key(settings.predictions_topic, p), "offset")
        total += int(v or 0)
    return total


async def assert_matches(store, records) -> None:
    expected = expected_profiles(records)
    groups = by_window(records)
    for model, windows in expected.items():
        assert await window_counts(store, model) == {s: p.count for s, p in windows.items()}
        members = await store.window_members(model, 0, float("inf"))
        for got in await store.window_profiles(model, members):
            want = windows[got.window_start]
            xs = np.sort([r.features["x"] for r in groups[(model, got.window_start)]])
            assert got.features["c"].categorical.frequencies() == want.features["c"].categorical.frequencies()
            assert (got.features["x"].numeric.min, got.features["x"].numeric.max) == (xs[0], xs[-1])
            for p in (0.01, 0.25, 0.5, 0.75, 0.99):  # rank of the reported quantile, vs exact data
                rank = np.searchsorted(xs, got.features["x"].numeric.quantile(p), side="right") / xs.size
                assert abs(rank - p) <= 0.01


_counted: tuple[list[PredictionRecord], int, Counter] | None = None


def records_per_model(records: list[PredictionRecord]) -> Counter:
    """How many of ``records`` each model has, counted once per list (conditions that poll
    :func:`all_windows_stored` would otherwise count 200,000 records every 50 ms)."""
    global _counted
    if _counted is None or _counted[0] is not records or _counted[1] != len(records):
        _counted = (records, len(records), Counter(r.model_id for r in records))
    return _counted[2]


async def all_windows_stored(store, records) -> bool:
    want = records_per_model(records)
    for m in MODELS:
        n = want[m]
        if sum((await window_counts(store, m)).values()) != n:
            return False
    return True


def stop(proc, sig=signal.SIGTERM, timeout: float = 30) -> int:
    proc.send_signal(sig)
    return proc.wait(timeout)


async def test_sigkill_at_random_moments_loses_and_double_counts_nothing(proc_settings, store, tmp_path):
    settings = proc_settings
    await ensure_topics(settings)
    records = workload(200_000, windows=12)
    rnd = random.Random(42)
    chunks = np.array_split(np.arange(len(records)), 5)
    log = tmp_path / "aggregator.log"
    for chunk in chunks:
        await produce(settings, [records[j] for j in chunk])
        proc = role_process(settings, "aggregate", log)
        progress = await committed_offsets(store, settings)

        async def moved(progress=progress) -> bool:
            return await committed_offsets(store, settings) > progress

        await wait_for(moved, timeout=60)
        await asyncio.sleep(rnd.uniform(0.0, 1.0))
        proc.kill()
        proc.wait()
    proc = role_process(settings, "aggregate", log)
    try:
        await wait_for(lambda: all_windows_stored(store, records), timeout=180)
    finally:
        assert stop(proc) == 0
    await assert_matches(store, records)


async def test_three_replicas_with_a_rebalance_mid_window_equal_one(proc_settings, store, tmp_path):
    # Windows stay open across the rebalance (idle close well above its pause), so
    # records keep arriving for windows whose partition changed owner.
    settings = proc_settings.model_copy(update={"idle_close_seconds": 30.0})
    await ensure_topics(settings)
    records = workload(60_000, windows=4, seed=1)
    half = len(records) // 2
    log = tmp_path / "aggregators.log"
    procs = [role_process(settings, "aggregate", log) for _ in range(3)]
    try:
        await produce(settings, records[:half])

        async def some_progress() -> bool:
            return await committed_offsets(store, settings) > 0

        await wait_for(some_progress, timeout=60)
        assert stop(procs.pop(0)) == 0          # a replica leaves mid-window (graceful)
        procs.pop(0).kill()                     # another dies
        procs.append(role_process(settings, "aggregate", log))  # and one joins
        await produce(settings, records[half:])
        await wait_for(lambda: all_windows_stored(store, records), timeout=180)
    finally:
        for p in procs:
            if p.poll() is None:
                stop(p)
    await assert_matches(store, records)


def aggregated(metrics_port: int) -> float:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as resp:
            text = resp.read().decode()
    except OSError:
        return -1.0
    for family in text_string_to_metric_families(text):
        if family.name == "fleetwatch_records_aggregated":
            return sum(s.value for s in family.samples if s.name.endswith("_total"))
    return -1.0


async def test_sigterm_drains_checkpoints_and_exits_promptly(proc_settings, store, tmp_path):
    port = free_port()
    settings = proc_settings.model_copy(update={
        "idle_close_seconds": 3600.0, "checkpoint_interval_seconds": 3600.0, "metrics_port": port})
    await ensure_topics(settings)
    records = workload(5_000, windows=1, seed=2)
    await produce(settings, records)
    proc = role_process(settings, "aggregate", tmp_path / "a.log")

    async def all_aggregated() -> bool:  # in memory only: no checkpoint before SIGTERM
        return aggregated(port) == len(records)

    await wait_for(all_aggregated, timeout=60)
    assert await committed_offsets(store, settings) == 0
    t = time.monotonic()
    assert stop(proc) == 0
    assert time.monotonic() - t < 10
    # SIGTERM flushed the open windows' partial state with the offsets they cover.
    partial = 0
    for p in range(settings.topic_partitions):
        for name, value in (await store.r.hgetall(partition_key(settings.predictions_topic, p))).items():
            if name.startswith(b"open:"):
                partial += WindowProfile.from_bytes(value).count
    assert partial == len(records) and await committed_offsets(store, settings) > 0
    restarted = role_process(proc_settings.model_copy(update={"idle_close_seconds": 1.0}),
                             "aggregate", tmp_path / "a.log")
    try:
        await wait_for(lambda: all_windows_stored(store, records), timeout=60)
    finally:
        assert stop(restarted) == 0
    await assert_matches(store, records)
