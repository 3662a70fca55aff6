"""Fuzz: keyless, mis-keyed, oversize, far-future and undecodable messages mixed with
good ones, through the real broker into a running aggregator. It survives, every bad
message is in the dead-letter topic with its reason (found by the ``source`` header),
and the good records' per-window counts are exact."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdk.record import PredictionRecord
from sdk.wire import encode_batch
from service.kafka import ensure_topics
from service.profiles.aggregator import Aggregator
from tests.conftest import wait_for
from tests.roles import header, window_counts

WINDOW = 300
T0 = 1_700_000_100 - 1_700_000_100 % WINDOW
BIG = "x" * 1_200_000  # a feature value that makes its message larger than 1 MiB
KINDS = ("good", "keyless", "miskeyed", "oversize", "future", "garbage")
# The reason each kind of bad message is dead-lettered with (garbage: any wire reason).
REASONS = {"keyless": {"missing_key"}, "miskeyed": {"key_mismatch"}, "oversize": {"too_large"},
           "future": {"future_event_time"}, "garbage": {"undecodable", "bad_envelope"}}

message = st.fixed_dictionaries({
    "kind": st.sampled_from(KINDS),
    "model": st.integers(0, 2),
    "windows": st.lists(st.integers(0, 3), min_size=1, max_size=30),  # one record per entry
    "future": st.integers(1, 5),
    "partition": st.integers(0, 3),
    "garbage": st.binary(max_size=64),
})


class Harness:
    """One aggregator and one dead-letter reader for the whole test."""

    def __init__(self, settings, store) -> None:
        self.settings, self.store = settings, store
        self.letters: dict[str, list] = collections.defaultdict(list)  # by source header

    async def read_dead_letters(self) -> None:
        consumer = AIOKafkaConsumer(
            self.settings.dead_letter_topic, bootstrap_servers=self.settings.kafka_bootstrap,
            auto_offset_reset="earliest", group_id=None, fetch_max_bytes=64 * 1024 * 1024,
            max_partition_fetch_bytes=16 * 1024 * 1024)
        await consumer.start()
        try:
            while True:
                for msgs in (await consumer.getmany(timeout_ms=200)).values():
                    for m in msgs:
                        self.letters[header(m, "source")].append(m)
        finally:
            await consumer.stop()


@pytest.fixture
async def harness(settings, store):
    settings = settings.model_copy(update={
        "allowed_lateness_seconds": 3_600,  # windows close when their model goes idle
        "idle_close_seconds": 1.5,
    })
    await ensure_topics(settings)
    h = Harness(settings, store)
    stop = asyncio.Event()
    h.aggregator = asyncio.create_task(Aggregator(settings, store).run(stop))
    reader = asyncio.create_task(h.read_dead_letters())
    h.producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all",
                                  max_request_size=8 * 1024 * 1024)
    await h.producer.start()
    try:
        yield h
    finally:
        await h.producer.stop()
        stop.set()
        await asyncio.wait_for(h.aggregator, 30)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


def build(spec: dict, models: list[str], j: int
          ) -> tuple[bytes | None, bytes, int | None, collections.Counter]:
    """(key, value, partition, good records per (model, window start)) of one message."""
    model = models[spec["model"]]
    good = [PredictionRecord(model, "1", f"p{j}-{i}", T0 + w * WINDOW + i % WINDOW, {"x": float(i)})
            for i, w in enumerate(spec["windows"])]
    records, key, partition = list(good), model.encode(), None
    kind = spec["kind"]
    if kind == "garbage":
        return key, b"\xc1" + spec["garbage"], None, collections.Counter()
    if kind == "oversize":
        records.append(PredictionRecord(model, "1", f"big{j}", T0 + 1.0, {"s": BIG}))
    if kind == "future":
        far = time.time() + 2 * 86_400
        records += [PredictionRecord(model, "1", f"f{j}-{i}", far, {"x": 1.0}) for i in range(spec["future"])]
    if kind == "keyless":
        key, partition = None, spec["partition"]
    if kind == "miskeyed":
        key = models[(spec["model"] + 1) % len(models)].encode()
    counted = kind in ("good", "oversize", "future")
    expected = collections.Counter((model, r.event_time // WINDOW * WINDOW) for r in good) if counted \
        else collections.Counter()
    return key, encode_batch(records), partition, expected


@settings(max_examples=8, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(specs=st.lists(message, min_size=1, max_size=8))
async def test_bad_messages_are_dead_lettered_and_good_counts_exact(harness, specs):
    h = harness
    models = [f"fz-{uuid.uuid4().hex[:8]}-{i}" for i in range(3)]
    expected: collections.Counter = collections.Counter()
    sent = []
    for j, spec in enumerate(specs):
        key, value, partition, counts = build(spec, models, j)
        expected += counts
        sent.append((spec["kind"], value,
                     h.producer.send(h.settings.predictions_topic, value, key=key, partition=partition)))
    sources = {}
    for kind, value, fut in sent:
        md = await (await fut)
        sources[f"{md.topic}:{md.partition}:{md.offset}"] = (kind, value)

    async def settled() -> bool:
        assert not h.aggregator.done(), "the aggregator died"
        for m in models:
            want = {int(w): n for (mm, w), n in expected.items() if mm == m}
            if await window_counts(h.store, m) != want:
                return False
        return all(kind == "good" or h.letters.get(src) for src, (kind, _v) in sources.items())

    await wait_for(settled, timeout=30)
    for src, (kind, value) in sources.items():
        letters = h.letters.get(src, [])
        if kind == "good":
            assert letters == []
            continue
        (letter,) = letters
        assert header(letter, "reason") in REASONS[kind], (kind, header(letter, "reason"))
        assert len(letter.value) <= h.settings.dead_letter_max_bytes
        if kind == "oversize":
            assert header(letter, "truncated") == "value"
            assert header(letter, "original_size") == str(len(value))
            assert header(letter, "sha256") == hashlib.sha256(value).hexdigest()
        elif kind != "future":
            assert letter.value == value
