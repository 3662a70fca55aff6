"""Redis store of receivers (``service.paging.receiver_config``).

Key layout:

==================  ==================================================
``{fw}:receivers``  HASH receiver id -> JSON :class:`Receiver` (with its
                    secret and routing key: the API never returns them)
==================  ==================================================

Receivers are few (people create them), so every read loads the hash and
sorts in memory, as silences do.
"""

from __future__ import annotations

import logging
import uuid

from service.alerting.silences import STORED, read_matching
from service.paging.keys import RECEIVERS
from service.paging.receiver_config import Receiver, ReceiverSpec
from service.runtime.redis_client import Client
from service.stored import encode_stored

log = logging.getLogger(__name__)


class ReceiverStore:
    """Create, read and delete receivers in Redis.

    Parameters
    ----------
    r : service.runtime.redis_client.Client
        The client (``Store.r``).
    """

    def __init__(self, r: Client, role: str = "api") -> None:
        self.r = r
        self.role = role

    def _read(self, key: bytes | str, raw: bytes) -> Receiver | None:
        """A stored receiver; an unreadable one is logged, counted and skipped."""
        return read_matching(Receiver, key, raw, role=self.role, kind="receiver")

    async def create(self, spec: ReceiverSpec, now: float) -> Receiver:
        """Store a new receiver (id: a random uuid4 hex) created at ``now`` (Unix s)."""
        receiver = Receiver(**spec.model_dump(), id=uuid.uuid4().hex, created_at=now)
        await self.r.hset(RECEIVERS, receiver.id, encode_stored(receiver, context=STORED))
        return receiver

    async def get(self, receiver_id: str) -> Receiver | None:
        raw = await self.r.hget(RECEIVERS, receiver_id)
        return None if raw is None else self._read(receiver_id, raw)

    async def all(self) -> list[Receiver]:
        """Every receiver, newest first (an unreadable one is logged and skipped)."""
        read = (self._read(k, raw) for k, raw in (await self.r.hgetall(RECEIVERS)).items())
        out = [r for r in read if r is not None]
        return sorted(out, key=lambda x: (x.created_at, x.id), reverse=True)

    async def list(self, limit: int, offset: int = 0) -> list[Receiver]:
        """A page of receivers, newest first."""
        return (await self.all())[offset:offset + limit]

    async def delete(self, receiver_id: str) -> bool:
        """Remove a receiver; False if unknown. Its pending notifications are
        dead-lettered by the notifier (reason ``receiver deleted``)."""
        return bool(await self.r.hdel(RECEIVERS, receiver_id))
