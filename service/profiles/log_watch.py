"""The aggregator's side of log continuity (:mod:`service.profiles.continuity` decides what
a fetch means): the first fetch after acquiring a partition checked against the
checkpoint's last message, and a partition whose log went backwards (the broker lost or
replaced it) read again from its earliest offset."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import IllegalStateError

from service import metrics
from service.profiles.continuity import GAP, REPLACED, SHORTER
from service.profiles.partition import PartitionState

log = logging.getLogger("fleetwatch.aggregator")


async def continues(consumer: AIOKafkaConsumer, tp: TopicPartition, state: PartitionState, first) -> bool:
    """Verify the first message fetched after acquiring a partition against the
    checkpoint's last message (:mod:`service.profiles.continuity`); False: drop this fetch."""
    verdict = state.continuity.first_message(first, state.offset)
    if verdict == REPLACED:
        await rewind(consumer, tp, state, REPLACED, f"offset {first.offset} holds another message than "
                                                    f"the checkpoint's last ({state.tail})")
        return False
    if verdict == GAP:
        metrics.LOG_DISCONTINUITIES.labels(reason=GAP).inc()
        log.warning("partition %d: the log now starts at offset %d, after the checkpoint's "
                    "offset %d: the records in between were deleted unread (retention)",
                    tp.partition, first.offset, state.offset)
    return True  # "covered": the checkpoint's last message, skipped as already read


async def watch_logs(consumer: AIOKafkaConsumer, topic: str, partitions: Mapping[int, PartitionState],
                     now: float | None = None) -> None:
    """After each poll: a partition whose broker reports a high watermark below the
    checkpointed offset (for ``log_rewind_confirm_seconds``) lost its log."""
    now = time.monotonic() if now is None else now
    for p, state in list(partitions.items()):
        tp = TopicPartition(topic, p)
        if state.continuity.shorter(consumer.highwater(tp), state.offset, now):
            await rewind(consumer, tp, state, SHORTER, f"the broker's log ends at offset "
                                                       f"{consumer.highwater(tp)}")


async def rewind(consumer: AIOKafkaConsumer, tp: TopicPartition, state: PartitionState, reason: str,
                 detail: str) -> None:
    """Read a partition whose log went backwards again from its earliest offset,
    keeping the open windows and clocks the checkpoint holds (the new log holds
    only records never read, so nothing is counted twice)."""
    metrics.LOG_DISCONTINUITIES.labels(reason=reason).inc()
    log.warning("partition %d of %s went backwards: checkpoint at offset %s, but %s; the broker "
                "lost or replaced its log. Reading it again from the earliest offset; the %d open "
                "window(s) and the closed windows already stored are kept",
                tp.partition, tp.topic, state.offset, detail, len(state.open))
    state.offset, state.last_msg = None, None
    state.continuity.reset()
    with contextlib.suppress(IllegalStateError):  # revoked meanwhile: its next owner checks
        await consumer.seek_to_beginning(tp)
