"""Bad input never stops the pipeline: each kind is dead-lettered with its reason,
counted on /metrics, and the rest of its batch is processed."""

from __future__ import annotations

import collections

import httpx
import msgpack
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from service.api.app import create_app
from tests.conftest import wait_for
from tests.roles import running, window_counts

T0 = 1_700_000_100


def row(pid: str, **over) -> list:
    fields = {"model_version": "1", "prediction_id": pid, "event_time": T0 + 1.0,
              "features": {"x": 1.0}, "score": None, "class_probabilities": None,
              "predicted_label": None, "slices": {}, "latency_ms": None}
    fields.update(over)
    return list(fields.values())


def message(*rows: list, model: str = "m", version: int = 1) -> bytes:
    return msgpack.packb({"v": version, "m": model, "r": list(rows)})


# (Kafka key, value, reason, records dead-lettered, good records in the same message)
CASES = [
    (b"m", b"\xff\x00 not msgpack", "undecodable", 1, 0),
    (b"m", b"\x92\xa3ab\xc3\xa2\xff\xfe", "undecodable", 1, 0),  # non-UTF-8 string
    (b"m", message(version=99), "unknown_schema_version", 1, 0),
    (b"m", msgpack.packb({"v": 1, "r": []}), "bad_envelope", 1, 0),
    (b"m", message(row("ok1"), row("t1", event_time="noon")), "wrong_type", 1, 1),
    (b"m", message(row("ok2"), row("", ), row("t2", event_time=None)), "missing_field", 2, 1),
    (b"m", message(row("ok3"), row("nan", score=float("nan")), row("inf", latency_ms=float("inf"))),
     "not_finite", 2, 1),
    (b"m", message(row("ok4"), row("wide", features={f"f{i}": 1.0 for i in range(10_000)})),
     "too_large", 1, 1),
    (b"m", message(row("ok5"), row("big", features={"s": "x" * 1_000_000})), "too_large", 1, 1),
    (b"other", message(row("k1")), "key_mismatch", 1, 0),
    (b"m", message(row("ok6"), row("old", event_time=-5.0)), "out_of_range", 1, 1),
]


def dead_lettered(metrics_text: str) -> dict[str, float]:
    for family in text_string_to_metric_families(metrics_text):
        if family.name == "fleetwatch_records_dead_lettered":
            return {s.labels["reason"]: s.value for s in family.samples if s.name.endswith("_total")}
    raise AssertionError("fleetwatch_records_dead_lettered_total not exported")


async def test_every_kind_of_bad_input_is_dead_lettered_counted_and_the_rest_processed(settings, store):
    app = create_app(settings, store)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
    before = dead_lettered((await http.get("/metrics")).text)
    expected = collections.Counter()
    for _key, _value, reason, n, _good in CASES:
        expected[reason] += n
    good = sum(c[4] for c in CASES)
    async with running(settings, store, "aggregator"):
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all",
                                    max_request_size=8 * 1024 * 1024)
        await producer.start()
        try:
            for key, value, *_ in CASES:
                await producer.send_and_wait(settings.predictions_topic, value, key=key)
            await producer.send_and_wait(settings.predictions_topic, message(row("last")), key=b"m")
        finally:
            await producer.stop()

        async def counted() -> dict[str, float]:
            after = dead_lettered((await http.get("/metrics")).text)
            return {r: after[r] - before.get(r, 0) for r in expected}

        async def processed() -> bool:  # every message, on every partition, handled
            return (sum((await window_counts(store, "m")).values()) == good + 1
                    and await counted() == dict(expected))

        try:
            await wait_for(processed, timeout=60)
        finally:
            got = await counted()
            await http.aclose()
    assert got == dict(expected)

    consumer = AIOKafkaConsumer(settings.dead_letter_topic, bootstrap_servers=settings.kafka_bootstrap,
                                auto_offset_reset="earliest", group_id=None,
                                fetch_max_bytes=64 * 1024 * 1024, max_partition_fetch_bytes=16 * 1024 * 1024)
    await consumer.start()
    reasons: collections.Counter = collections.Counter()
    try:
        while sum(reasons.values()) < len(CASES):
            batch = await consumer.getmany(timeout_ms=5000)
            assert batch, f"dead letters missing; got {reasons}"
            for msgs in batch.values():
                for m in msgs:
                    headers = dict(m.headers)
                    reasons[headers["reason"].decode()] += 1
                    assert headers["detail"]
    finally:
        await consumer.stop()
    assert reasons == collections.Counter(c[2] for c in CASES)
