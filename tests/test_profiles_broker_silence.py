"""The aggregator's broker-silence guard sees an outage that falls between two
checkpoints: whether the broker answers is sampled after every poll, so windows do
not idle-close right after the broker comes back (producers are still re-sending
what they buffered).

No broker, Redis or sleeping: the aggregator's real consume loop (``Aggregator.run``)
runs against a fake consumer, producer and store on a fake clock that each poll
advances by its timeout.
"""

from __future__ import annotations

import asyncio
import json

from aiokafka import TopicPartition

import service.profiles.aggregator as aggregator_module
import service.profiles.broker_watch as broker_watch
from service.profiles.aggregator import Aggregator
from service.profiles.checkpoints import PartitionCheckpoint
from service.profiles.partition import BROKER_SILENCE_SECONDS, BrokerFreshness
from service.settings import Settings
from sketches.profile import WindowProfile

T0 = 1_700_000_000.0
IDLE_CLOSE = 8.0
INTERVAL = 10.0  # checkpoints at T0 + 10, + 20, ...
OUTAGE = (T0 + 1.0, T0 + 7.5)  # longer than BROKER_SILENCE_SECONDS, between two checkpoints
END = T0 + 30.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t


class FakeConsumer:
    """Polls advance the clock by their timeout; the broker answers a fetch for the
    partition at every poll outside ``OUTAGE``."""

    def __init__(self, clock: Clock, topic: str, stop: asyncio.Event) -> None:
        self.clock, self.tp, self.stop_event = clock, TopicPartition(topic, 0), stop
        self.listener = None
        self.assigned: set[TopicPartition] = set()
        self.polled_ms: int | None = None

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def subscribe(self, topics, listener) -> None:
        self.listener = listener

    async def getmany(self, timeout_ms: int):
        if not self.assigned:
            self.assigned.add(self.tp)
            await self.listener.on_partitions_assigned([self.tp])
        self.clock.t += timeout_ms / 1000
        if not OUTAGE[0] <= self.clock.t < OUTAGE[1]:
            self.polled_ms = int(self.clock.t * 1000)
        if self.clock.t >= END:
            self.stop_event.set()
        return {}

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    def last_poll_timestamp(self, tp: TopicPartition) -> int | None:
        assert tp in self.assigned
        return self.polled_ms

    def highwater(self, tp: TopicPartition) -> int:
        return 0  # nothing in the partition: never a backlog

    def seek(self, tp, offset) -> None: ...

    async def commit(self, offsets) -> None: ...


class FakeProducer:
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def flush(self) -> None: ...


class FakeStore:
    """One partition whose checkpoint holds one open window of model ``m``, which has
    sent nothing since (so it closes once idle for ``IDLE_CLOSE`` and caught up)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.closed_at: list[float] = []

    async def acquire_partition(self, topic: str, partition: int) -> PartitionCheckpoint:
        profile = WindowProfile("m", 0, 300)
        return PartitionCheckpoint(epoch=1, fields={
            "open:" + json.dumps(["m", "1", 300, 0]): profile.to_bytes()})

    async def model_configs(self, model_ids, role):  # none stored: every model has the defaults
        return dict.fromkeys(model_ids)

    async def publish_pending(self, topic, partition, cp, retention) -> list:
        return []

    async def checkpoint(self, topic, partition, epoch, updates, deleted, closed, retention, published, seq,
                         full=False) -> list:
        self.closed_at += [self.clock.t] * len(closed)
        return list(closed)


def test_outage_between_checkpoints_delays_idle_close(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(aggregator_module, "time", clock)
    monkeypatch.setattr(broker_watch, "time", clock)  # where the caught-up rule reads the time
    settings = Settings(kafka_bootstrap="fake:9092", redis_url="redis://fake:6379",
                        idle_close_seconds=IDLE_CLOSE, checkpoint_interval_seconds=INTERVAL)
    store = FakeStore(clock)
    agg = Aggregator(settings, store)
    stop = asyncio.Event()
    consumer = FakeConsumer(clock, settings.predictions_topic, stop)
    monkeypatch.setattr(aggregator_module, "AIOKafkaConsumer", lambda **_kw: consumer)
    monkeypatch.setattr(aggregator_module, "AIOKafkaProducer", lambda **_kw: FakeProducer())
    assert OUTAGE[1] - OUTAGE[0] > BROKER_SILENCE_SECONDS

    asyncio.run(agg.run(stop))

    # At the first checkpoint (T0 + 10) the model has been idle for IDLE_CLOSE and the
    # broker answers, but it came back only 2.5 s before: the window stays open then
    # and closes at the next checkpoint. (Sampled only at checkpoints, the outage went
    # unseen and the window closed at T0 + 10.)
    assert len(store.closed_at) == 1
    assert store.closed_at[0] - T0 >= OUTAGE[1] - T0 + IDLE_CLOSE


def test_freshness_sampling():
    f = BrokerFreshness()
    assert not f.settled(T0, 0)  # no fetch response yet
    f.sample(int(T0 * 1000), T0)
    assert f.settled(T0, IDLE_CLOSE) and f.back_at < T0  # answering from the start: not "back"
    for t in range(1, 8):  # the broker is silent; its last answer ages
        f.sample(int(T0 * 1000), T0 + t)
    assert f.silent and not f.settled(T0 + 7, 0)
    f.sample(int((T0 + 8) * 1000), T0 + 8)  # back
    assert not f.silent and f.back_at == T0 + 8
    f.sample(int((T0 + 15) * 1000), T0 + 15)  # answering on: back_at stays
    assert f.back_at == T0 + 8
    assert not f.settled(T0 + 8 + IDLE_CLOSE - 0.1, IDLE_CLOSE)
    assert f.settled(T0 + 8 + IDLE_CLOSE, IDLE_CLOSE)
    f.sample(int((T0 + 20) * 1000), T0 + 20)
    # A sample that was fresh is not trusted for ever: if no poll samples again
    # (the loop is stuck, e.g. waiting for Redis), its answer ages out.
    assert not f.settled(T0 + 20 + BROKER_SILENCE_SECONDS + 0.1, 0)
