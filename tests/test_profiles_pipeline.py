"""Integration: SDK -> real Kafka-protocol broker -> aggregator -> real Redis."""

from __future__ import annotations

import collections

import numpy as np

from sdk import AsyncClient
from service.registry import ModelConfig
from tests.conftest import wait_for
from tests.metric_samples import sample
from tests.roles import running, window_counts

T0 = 1_700_000_000  # a window boundary for 300 s windows: 1_700_000_000 % 300 == 200
WINDOW = 300


async def test_counts_per_window_equal_what_the_sdk_produced(settings, store):
    rng = np.random.default_rng(7)
    models = ["fraud", "churn"]
    expected: dict[str, collections.Counter] = {m: collections.Counter() for m in models}
    n = 6_000
    async with running(settings, store, "aggregator"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic,
                               batch_size=250, linger_ms=20) as client:
            for i in range(n):
                m = models[i % 2]
                t = T0 + float(rng.uniform(0, 5 * WINDOW))
                ok = client.log_prediction(
                    m, {"x": float(rng.normal()), "c": str(rng.integers(5))},
                    model_version="1", prediction_id=f"p{i}", event_time=t, score=0.5,
                )
                assert ok
                expected[m][int(t // WINDOW) * WINDOW] += 1
            await client.flush()
            assert client.stats.sent == n and client.stats.dropped == 0

        async def all_stored() -> bool:
            got = [sum((await window_counts(store, m)).values()) for m in models]
            return got == [n // 2, n // 2]

        await wait_for(all_stored, timeout=60)
    for m in models:
        assert await window_counts(store, m) == dict(expected[m])
    assert sorted(await store.models()) == sorted(models)


async def test_late_records_are_dead_lettered_not_merged(settings, store):
    async with running(settings, store, "aggregator"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic,
                               linger_ms=10) as client:
            for i in range(50):
                client.log_prediction("m2", {"x": 1.0}, prediction_id=f"a{i}", event_time=T0 + i)
            await client.flush()

            async def first_window_closed() -> bool:
                return sum((await window_counts(store, "m2")).values()) == 50

            await wait_for(first_window_closed, timeout=60)
            before = sample("fleetwatch_records_dead_lettered_total", reason="late")
            client.log_prediction("m2", {"x": 1.0}, prediction_id="late", event_time=T0 + 5)
            await client.flush()

            async def late_counted() -> bool:
                return sample("fleetwatch_records_dead_lettered_total", reason="late") == before + 1

            await wait_for(late_counted, timeout=30)

            async def late_persisted() -> bool:  # per model, with the partition's checkpoint
                return (await store.dropped_records(settings.predictions_topic, ["m2"]))["m2"].late == 1

            await wait_for(late_persisted, timeout=30)
    assert sum((await window_counts(store, "m2")).values()) == 50


async def test_slices_configured_for_the_model_are_profiled_and_capped(settings, store):
    await store.put_model_config("sliced", ModelConfig(slice_features=["country"], max_slice_values=2))
    countries = ["DE"] * 30 + ["FR"] * 20 + ["IT"] * 5 + ["ES"] * 5
    capped = sample("fleetwatch_slice_records_capped_total")
    async with running(settings, store, "aggregator"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic,
                               linger_ms=10) as client:
            for i, c in enumerate(countries):
                client.log_prediction("sliced", {"x": float(i)}, prediction_id=f"s{i}",
                                      event_time=T0 + i, score=0.1, slices={"country": c})
            await client.flush()

        async def stored() -> bool:
            return sum((await window_counts(store, "sliced")).values()) == len(countries)

        await wait_for(stored, timeout=60)
    [member] = await store.window_members("sliced", 0, float("inf"))
    profile = await store.window_profile("sliced", member)
    by_value = {k: p.count for k, p in profile.slices["country"].profiles.items()}
    assert by_value == {"DE": 30, "FR": 20, "__other__": 10}
    assert sample("fleetwatch_slice_records_capped_total") == capped + 10
