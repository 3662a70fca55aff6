"""Integration: SDK -> real Kafka-protocol broker -> aggregator -> real Redis."""

from __future__ import annotations

import collections

import msgpack
import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from sdk import AsyncClient
from sdk.record import PredictionRecord
from sdk.wire import encode_batch
from service import metrics
from tests.conftest import wait_for
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


async def test_malformed_messages_are_dead_lettered_and_the_rest_is_processed(settings, store):
    good = [PredictionRecord("m1", "1", f"p{i}", T0 + i, {"x": float(i)}) for i in range(100)]
    bad_record = msgpack.packb({"v": 1, "m": "m1", "r": [
        ["1", "ok", T0 + 1.0, {"x": 1.0}, None, None, None, {}, None],
        ["1", "bad", "not-a-time", {"x": 1.0}, None, None, None, {}, None],
    ]})
    unknown_version = msgpack.packb({"v": 99, "m": "m1", "r": []})
    before = {r: metrics.DEAD_LETTERED.labels(reason=r)._value.get()
              for r in ("undecodable", "invalid_record")}
    async with running(settings, store, "aggregator"):
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        await producer.start()
        try:
            for value in (b"\xff\x00garbage", bad_record, unknown_version, encode_batch(good)):
                await producer.send_and_wait(settings.predictions_topic, value, key=b"m1")
        finally:
            await producer.stop()

        async def counted() -> bool:
            return sum((await window_counts(store, "m1")).values()) == 101

        await wait_for(counted, timeout=60)

    assert metrics.DEAD_LETTERED.labels(reason="undecodable")._value.get() - before["undecodable"] == 2
    assert metrics.DEAD_LETTERED.labels(reason="invalid_record")._value.get() - before["invalid_record"] == 1
    consumer = AIOKafkaConsumer(settings.dead_letter_topic, bootstrap_servers=settings.kafka_bootstrap,
                                auto_offset_reset="earliest", group_id=None)
    await consumer.start()
    try:
        reasons = []
        while len(reasons) < 3:
            batch = await consumer.getmany(timeout_ms=5000)
            assert batch, "dead letters did not arrive"
            for msgs in batch.values():
                reasons += [dict(m.headers)["reason"].decode() for m in msgs]
    finally:
        await consumer.stop()
    assert sorted(reasons) == ["invalid_record", "undecodable", "undecodable"]


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
            before = metrics.DEAD_LETTERED.labels(reason="late")._value.get()
            client.log_prediction("m2", {"x": 1.0}, prediction_id="late", event_time=T0 + 5)
            await client.flush()

            async def late_counted() -> bool:
                return metrics.DEAD_LETTERED.labels(reason="late")._value.get() == before + 1

            await wait_for(late_counted, timeout=30)
    assert sum((await window_counts(store, "m2")).values()) == 50
