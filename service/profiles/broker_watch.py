"""Whether the broker answers for an aggregator's partitions and how far behind it reads:
the consumer lag per partition, sampled after every poll, and the "caught up" rule that
lets idle windows close (no backlog, the broker answering, and not just back from a
silence)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition

from service import metrics
from service.profiles.partition import PartitionState


def partition_lag(consumer: AIOKafkaConsumer, topic: str, state: PartitionState) -> int | None:
    """Records between the partition's high watermark and our position (None: unknown)."""
    high = consumer.highwater(TopicPartition(topic, state.partition))
    if high is None:
        return None
    return max(high - (state.offset or 0), 0)


def sample_broker(consumer: AIOKafkaConsumer, topic: str, partitions: Mapping[int, PartitionState],
                  now: float | None = None) -> None:
    """After each poll: note, per owned partition, when the broker last answered a
    fetch for it and whether it has just come back after a silence (read at
    checkpoints by :func:`caught_up`)."""
    now = time.time() if now is None else now
    assigned = consumer.assignment()
    for p, state in partitions.items():
        tp = TopicPartition(topic, p)
        state.broker.sample(consumer.last_poll_timestamp(tp) if tp in assigned else None, now)


def caught_up(consumer: AIOKafkaConsumer, topic: str, state: PartitionState, idle_close_seconds: float,
              now: float | None = None) -> bool:
    """No backlog, as of a fetch response less than :data:`BROKER_SILENCE_SECONDS` old,
    and not within ``idle_close_seconds`` of the broker coming back (producers are
    still re-sending what they buffered during the outage), as sampled after each
    poll by :func:`sample_broker`."""
    now = time.time() if now is None else now
    if not state.broker.settled(now, idle_close_seconds):
        return False
    return partition_lag(consumer, topic, state) == 0


def export_lag(consumer: AIOKafkaConsumer, topic: str, partitions: Mapping[int, PartitionState]) -> None:
    """Set ``fleetwatch_consumer_lag{partition}`` of each owned partition whose lag is known."""
    for p, state in partitions.items():
        lag = partition_lag(consumer, topic, state)
        if lag is not None:
            metrics.CONSUMER_LAG.labels(partition=str(p)).set(lag)
