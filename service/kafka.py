"""Kafka helpers: topic creation at start-up, dead letters."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, TopicAlreadyExistsError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential

from service import metrics
from service.settings import Settings

log = logging.getLogger("fleetwatch.kafka")


async def ensure_topics(settings: Settings, timeout: float = 60.0) -> None:
    """Create the predictions, dead-letter and labels topics with ``topic_partitions``
    partitions if they do not exist, retrying while the broker starts.

    Raises
    ------
    aiokafka.errors.KafkaConnectionError
        If the broker is unreachable for ``timeout`` seconds.
    """
    async for attempt in AsyncRetrying(
        retry=retry_if_exception_type(KafkaConnectionError),
        wait=wait_exponential(multiplier=0.1, max=2),
        stop=stop_after_delay(timeout),
        reraise=True,
    ):
        with attempt:
            admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
            await admin.start()
            try:
                existing = set(await admin.list_topics())
                wanted = [settings.predictions_topic, settings.dead_letter_topic, settings.labels_topic]
                new = [
                    NewTopic(t, num_partitions=settings.topic_partitions, replication_factor=1)
                    for t in wanted
                    if t not in existing
                ]
                if new:
                    with contextlib.suppress(TopicAlreadyExistsError):
                        await admin.create_topics(new)
                    log.info("created topics %s", [t.name for t in new])
            finally:
                await admin.close()


def dead_letter(producer: AIOKafkaProducer, topic: str, key: bytes | None, value: bytes | None,
                reason: str, detail: str, n: int) -> None:
    """Send a rejected message (or the records of one) to the dead-letter topic with
    ``reason`` and ``detail`` headers, and count ``n`` records under ``reason``. Does
    not wait: flush the producer before committing offsets."""
    metrics.DEAD_LETTERED.labels(reason=reason).inc(n)
    log.warning("dead-lettering %d record(s): %s: %s", n, reason, detail[:300])
    headers = [("reason", reason.encode()), ("detail", detail[:10_000].encode())]
    asyncio.ensure_future(producer.send(topic, value=value, key=key, headers=headers))
