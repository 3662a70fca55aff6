"""Messages that would vanish or do damage: keyless and mis-keyed messages, dead
letters beyond the producer's request limit, failed dead-letter sends, records too
far in the future. Each reaches the dead-letter topic with its reason and is counted."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import logging
import time

import httpx
import msgpack
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaTimeoutError, UnsupportedVersionError

from sdk.labels import LabelColumns, encode_labels
from sdk.record import PredictionRecord
from sdk.wire import encode_batch
from service import metrics
from service.api.app import create_app
from service.kafka import DeadLetters
from service.settings import Settings
from tests.conftest import wait_for
from tests.metric_samples import sample
from tests.roles import dead_letters, header, running, window_counts

T0 = 1_700_000_100 - 1_700_000_100 % 300


def records(model: str, n: int, t: float = T0 + 10.0, prefix: str = "p") -> list[PredictionRecord]:
    return [PredictionRecord(model, "1", f"{prefix}{i}", t + i % 200, {"x": float(i)}) for i in range(n)]


def dead(reason: str) -> float:
    return sample("fleetwatch_records_dead_lettered_total", reason=reason)


async def producer_for(settings: Settings) -> AIOKafkaProducer:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all",
                                max_request_size=8 * 1024 * 1024)
    await producer.start()
    return producer


async def test_keyless_messages_spread_over_partitions_are_dead_lettered(settings, store):
    """1,600 records of one model without a key, one message on each of 4 partitions:
    accepted before (each partition's half of the window overwrote the others: 400 of
    1,600 stored); now every one is dead-lettered as ``missing_key`` and counted, and
    only the keyed records are stored."""
    before = dead(metrics.MISSING_KEY)
    async with running(settings, store, "aggregator"):
        producer = await producer_for(settings)
        try:
            for p in range(4):
                await producer.send_and_wait(settings.predictions_topic,
                                             encode_batch(records("m", 400, prefix=f"k{p}-")),
                                             key=None, partition=p)
            await producer.send_and_wait(settings.predictions_topic, encode_batch(records("m", 10)),
                                         key=b"m")
        finally:
            await producer.stop()

        async def settled() -> bool:
            return (sum((await window_counts(store, "m")).values()) == 10
                    and dead(metrics.MISSING_KEY) - before == 1_600)

        await wait_for(settled, timeout=60)
    letters = await dead_letters(settings, 4)
    assert sorted(header(m, "reason") for m in letters) == [metrics.MISSING_KEY] * 4
    assert all(m.key is None and header(m, "source").startswith(settings.predictions_topic + ":")
               for m in letters)


async def test_label_messages_without_or_with_another_key_are_dead_lettered(settings, store):
    settings = settings.model_copy(update={"labels_topic": settings.predictions_topic + "-labels",
                                           "joiner_group": settings.aggregator_group + "-joiner"})
    labels = encode_labels(LabelColumns("m", ["p1", "p2"], [True, False], [T0, T0]))
    before = (dead(metrics.MISSING_KEY), dead(metrics.KEY_MISMATCH))
    async with running(settings, store, "joiner"):
        producer = await producer_for(settings)
        try:
            await producer.send_and_wait(settings.labels_topic, labels, key=None, partition=1)
            await producer.send_and_wait(settings.labels_topic, labels, key=b"other")
        finally:
            await producer.stop()

        async def counted() -> bool:
            return (dead(metrics.MISSING_KEY) - before[0], dead(metrics.KEY_MISMATCH) - before[1]) == (2, 2)

        await wait_for(counted, timeout=60)
    letters = await dead_letters(settings, 2)
    assert sorted(header(m, "reason") for m in letters) == [metrics.KEY_MISMATCH, metrics.MISSING_KEY]
    assert all(m.value == labels for m in letters)


async def test_a_dead_letter_beyond_the_request_limit_arrives_truncated_with_size_and_hash(settings, store):
    """A 1.5 MB message whose one bad record sends the whole message to the dead-letter
    topic: before, the send failed in an unawaited task and the dead letter was lost."""
    envelope = {"v": 1, "m": "m", "r": [
        ["1", "ok", T0 + 1.0, {"x": 1.0}, None, None, None, {}, None],
        ["1", "big", T0 + 1.0, {"s": "x" * 1_500_000}, None, None, None, {}, None]]}
    value = msgpack.packb(envelope)
    assert len(value) > 1024 * 1024
    async with running(settings, store, "aggregator"):
        producer = await producer_for(settings)
        try:
            await producer.send_and_wait(settings.predictions_topic, value, key=b"m")
        finally:
            await producer.stop()

        async def stored() -> bool:
            return sum((await window_counts(store, "m")).values()) == 1

        await wait_for(stored, timeout=60)
    (letter,) = await dead_letters(settings, 1)
    assert header(letter, "reason") == "too_large"
    assert len(letter.value) <= settings.dead_letter_max_bytes
    assert value.startswith(letter.value)
    assert header(letter, "original_size") == str(len(value))
    assert header(letter, "sha256") == hashlib.sha256(value).hexdigest()
    assert header(letter, "truncated") == "value"


async def test_dead_letters_of_every_size_fit_the_limit(settings):
    """Key, value and detail together stay within ``dead_letter_max_bytes``; a small
    dead letter is sent as it is."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    sent = []

    class Recording:
        async def send(self, topic, value=None, key=None, headers=None):
            sent.append((key, value, headers))
            fut = asyncio.get_running_loop().create_future()
            fut.set_result(None)
            return fut

        async def flush(self) -> None: ...

    letters = DeadLetters(Recording(), settings)
    for size in (0, 10, 999_000, 1_048_576, 5_000_000):
        letters.send(b"k" * min(size, 2_000_000), b"v" * size, "too_large", "d" * size, 1)
    letters.send(None, None, "undecodable", "empty", 1)
    await letters.flush()
    assert len(sent) == 6
    for key, value, headers in sent:
        assert DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers) \
            <= settings.dead_letter_max_bytes
    assert sent[1][:2] == (b"k" * 10, b"v" * 10) and "truncated" not in dict(sent[1][2])


class FailingProducer:
    """Fails ``fail`` sends with ``error``, then delivers."""

    def __init__(self, error: Exception, fail: int) -> None:
        self.error, self.fail, self.delivered = error, fail, []

    async def send(self, topic, value=None, key=None, headers=None):
        fut = asyncio.get_running_loop().create_future()
        if self.fail:
            self.fail -= 1
            fut.set_exception(self.error)
        else:
            self.delivered.append(value)
            fut.set_result(None)
        return fut

    async def flush(self) -> None: ...


async def test_a_failed_dead_letter_send_is_retried_counted_and_logged(settings, caplog):
    """The delivery future used to fail unawaited ("Task exception was never retrieved");
    now every failure is counted and logged, a retriable one retried until delivered."""
    unretrieved = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: unretrieved.append(ctx))
    failures = sample("fleetwatch_dead_letter_send_failures_total")
    producer = FailingProducer(KafkaTimeoutError(), fail=2)
    letters = DeadLetters(producer, settings.model_copy(update={"dead_letter_retry_seconds": 30.0}))
    with caplog.at_level(logging.WARNING, "fleetwatch.kafka"):
        letters.send(b"m", b"value", "late", "1 record", 1)
        await letters.flush()
    assert producer.delivered == [b"value"]
    assert sample("fleetwatch_dead_letter_send_failures_total") - failures == 2
    assert sum("dead letter send failed" in r.message for r in caplog.records) == 2
    gc.collect()
    await asyncio.sleep(0)
    assert unretrieved == []


async def test_a_dead_letter_that_cannot_be_sent_is_counted_lost_and_logged(settings, caplog):
    lost = sample("fleetwatch_dead_letters_lost_total")
    producer = FailingProducer(UnsupportedVersionError(), fail=10)
    letters = DeadLetters(producer, settings)
    with caplog.at_level(logging.ERROR, "fleetwatch.kafka"):
        letters.send(b"m", b"value", "late", "1 record", 1)
        await letters.flush()
    assert producer.delivered == []
    assert sample("fleetwatch_dead_letters_lost_total") - lost == 1
    assert any("dead letter lost" in r.message for r in caplog.records)


@pytest.mark.parametrize("ahead", [2 * 86_400.0])
async def test_future_records_are_counted_per_model_and_shown_beside_late_records(settings, store, ahead):
    app = create_app(settings, store)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
    now = time.time()
    future = [PredictionRecord("f", "1", f"fut{i}", now + ahead, {"x": 1.0}) for i in range(3)]
    async with running(settings, store, "aggregator"):
        producer = await producer_for(settings)
        try:
            await producer.send_and_wait(settings.predictions_topic,
                                         encode_batch(records("f", 5) + future), key=b"f")
        finally:
            await producer.stop()

        async def shown() -> bool:
            listed = {m["model_id"]: m for m in (await http.get("/v1/models")).json()}
            return "f" in listed and (listed["f"]["future_records"], listed["f"]["late_records"]) == (3, 0)

        try:
            await wait_for(shown, timeout=60)
        finally:
            await http.aclose()
    got = await store.dropped_records(settings.predictions_topic, ["f", "absent"])
    assert (got["f"].future, got["f"].late, got["absent"].future) == (3, 0, 0)


async def test_messages_fetched_before_their_partition_is_acquired_are_read_again(settings):
    """A fetch can return a partition's messages while its state is still being loaded
    from Redis; they used to be skipped, and the consumer had moved past them (seen as a
    lost first message of a freshly assigned partition)."""
    from aiokafka import TopicPartition
    from aiokafka.structs import ConsumerRecord

    from service.profiles.aggregator import Aggregator

    tp = TopicPartition(settings.predictions_topic, 3)

    class Consumer:
        seeks: list = []

        def assignment(self):
            return {tp}

        def seek(self, partition, offset):
            self.seeks.append((partition, offset))

    agg = Aggregator(settings, store=None)
    agg._consumer = Consumer()
    msgs = [ConsumerRecord(tp.topic, 3, offset, 0, 0, b"m", encode_batch(records("m", 1)), None, 1, 10, [])
            for offset in (7, 8)]
    await agg.process({tp: msgs})
    assert agg._consumer.seeks == [(tp, 7)]


async def test_status_counts_a_models_dead_letters_by_reason_once_across_a_restart(settings, store):
    """GET /v1/models/{id}/status names every reason a model's records were dead-lettered
    for (not only late and future): records violating the contract, a message keyed by
    another model, an undecodable message keyed by the model. A model that does not exist
    gets no counters. The counts are checkpointed with the offsets, so an aggregator
    restarted on the same partitions counts nothing twice."""
    from service.registry import ModelConfig

    await store.put_model_config("dl", ModelConfig())
    app = create_app(settings, store)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
    bad = [PredictionRecord("dl", "1", f"inf{i}", T0 + 1.0, {"x": 1.0}, score=float("inf")) for i in range(2)]
    wrong = [PredictionRecord("dl", "1", f"w{i}", T0 + 1.0, {"x": {"a": 1}}) for i in range(3)]
    expected = {"not_finite": 2, "wrong_type": 3, "key_mismatch": 4, "undecodable": 1}

    async def counted() -> dict:
        return (await http.get("/v1/models/dl/status")).json()["records"]["dead_lettered"]

    async with running(settings, store, "aggregator"):
        producer = await producer_for(settings)
        try:
            for value, key in ((encode_batch(records("dl", 5) + bad + wrong), b"dl"),
                               (encode_batch(records("dl", 4, prefix="k")), b"other"),
                               (b"\xc1 not msgpack", b"dl"),
                               (encode_batch(records("ghost", 2)), b"ghost2"),
                               (b"\xc1 not msgpack", b"nosuchmodel")):
                await producer.send_and_wait(settings.predictions_topic, value, key=key)
        finally:
            await producer.stop()

        async def all_counted() -> bool:
            return await counted() == expected

        await wait_for(all_counted, timeout=60)
    async with running(settings, store, "aggregator"):  # restarted: resumes at the checkpoints
        producer = await producer_for(settings)
        try:  # one more of each on the partitions of the first messages, behind them
            await producer.send_and_wait(settings.predictions_topic, encode_batch(wrong[:1]), key=b"dl")
            await producer.send_and_wait(settings.predictions_topic, encode_batch(records("dl", 1)),
                                         key=b"other")
        finally:
            await producer.stop()
        expected = {**expected, "wrong_type": 4, "key_mismatch": 5}  # and nothing counted twice
        await wait_for(all_counted, timeout=60)
    got = await store.dead_letters(settings.predictions_topic, "ghost")
    assert got.by_reason == {} and not await store.model_exists("ghost")
    assert (await http.get("/v1/models/ghost/status")).status_code == 404
    await http.aclose()
