"""The durable notification outbox in Redis: enqueue, lease, retry, dead-letter.

Every notification is written here, in the same atomic step as the decision
that makes it (the transactional-outbox pattern), before any HTTP call; the
notifier then delivers what is due. Nothing in flight lives only in memory,
so a notifier that crashes loses nothing: its leased items fall due again
when the lease ends and another notifier (or itself, restarted) sends them.

The keys are listed in :mod:`service.paging.keys`.

Retry timing comes from tenacity's wait strategies (exponential backoff plus
jitter) evaluated for the attempt number, and is stored as the item's due
time, so a retry survives restarts and no task sleeps per item.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import tenacity

from service.paging.keys import (
    ITEM_PREFIX,
    OUTBOX_DUE,
    incident_index_key,
    outbox_index_key,
    outbox_queue_key,
    ratelimit_key,
)
from service.runtime.redis_client import Client

OutboxState = Literal["pending", "delivered", "dead"]
STATES: tuple[str, ...] = ("pending", "delivered", "dead")
RETENTION = timedelta(days=7)
KEEP = 10_000






# Commit a decision: compare-and-set a state hash on its 'v' field, update or delete
# it, set or remove its schedule, and enqueue the notifications it made.
# KEYS: guard hash, schedule zset, due zset, pending index.
# ARGV: expected v, mode ('set' | 'delete'), state JSON, ttl (0: none), schedule member,
#       schedule score ('' removes), items JSON, item key prefix.
_COMMIT = """
if (redis.call('HGET', KEYS[1], 'v') or '') ~= ARGV[1] then return 0 end
if ARGV[2] == 'delete' then
  redis.call('DEL', KEYS[1])
else
  for k, v in pairs(cjson.decode(ARGV[3])) do redis.call('HSET', KEYS[1], k, v) end
  redis.call('HINCRBY', KEYS[1], 'v', 1)
  if tonumber(ARGV[4]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[4])
  else redis.call('PERSIST', KEYS[1]) end
end
if ARGV[6] == '' then redis.call('ZREM', KEYS[2], ARGV[5])
else redis.call('ZADD', KEYS[2], ARGV[6], ARGV[5]) end
for _, it in ipairs(cjson.decode(ARGV[7])) do
  local key = ARGV[8] .. it.id
  for k, v in pairs(it.fields) do redis.call('HSET', key, k, v) end
  redis.call('RPUSH', it.queue, it.id)
  redis.call('ZADD', KEYS[4], it.fields.created_at, it.id)
  redis.call('ZADD', it.index, it.fields.created_at, it.id)
  redis.call('PERSIST', it.index)
  if redis.call('LINDEX', it.queue, 0) == it.id then
    redis.call('ZADD', KEYS[3], it.fields.due, it.id)
  end
end
return 1
"""

# Claim up to ARGV[3] due items: push each to the lease's end and stamp the token.
# KEYS: due zset. ARGV: now, lease end, limit, token, item key prefix.
_CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], ARGV[2], id)
  redis.call('HSET', ARGV[5] .. id, 'lease', ARGV[4])
  table.insert(out, id)
  table.insert(out, redis.call('HGETALL', ARGV[5] .. id))
end
return out
"""

# Finish a claimed item (delivered or dead) if the claim is still ours; the next item
# of its queue becomes due. The incident's index expires with the hashes once none of
# its items is pending. KEYS: item, due, queue, pending index, final index, incident
# index. ARGV: id, token, state, now, error, attempts, retention s, keep, item key prefix.
_FINISH = """
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'finished_at', ARGV[4], 'last_error', ARGV[5],
           'attempts', ARGV[6])
redis.call('HDEL', KEYS[1], 'lease')
redis.call('EXPIRE', KEYS[1], ARGV[7])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('LREM', KEYS[3], 1, ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[5], ARGV[4], ARGV[1])
local n = redis.call('ZCARD', KEYS[5])
if n > tonumber(ARGV[8]) then redis.call('ZREMRANGEBYRANK', KEYS[5], 0, n - tonumber(ARGV[8]) - 1) end
local head = redis.call('LINDEX', KEYS[3], 0)
if head then redis.call('ZADD', KEYS[2], redis.call('HGET', ARGV[9] .. head, 'due'), head) end
local pending = false
for _, id in ipairs(redis.call('ZRANGE', KEYS[6], 0, -1)) do
  if redis.call('ZSCORE', KEYS[4], id) then pending = true; break end
end
if not pending then redis.call('EXPIRE', KEYS[6], ARGV[7]) end
return 1
"""

# Put a claimed item back for later (a retry or a deferral) if the claim is ours.
# KEYS: item, due. ARGV: id, token, due, attempts, error.
_LATER = """
if redis.call('HGET', KEYS[1], 'lease') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'due', ARGV[3], 'attempts', ARGV[4], 'last_error', ARGV[5])
redis.call('HDEL', KEYS[1], 'lease')
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
"""

# Sliding-window rate limit: take a slot (returns 0) or tell when one frees (the oldest
# send's time + window). KEYS: the receiver's zset. ARGV: now, max, window, member.
_SLOT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[3]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return tostring(tonumber(oldest[2]) + tonumber(ARGV[3]))
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) + 1)
return '0'
"""


@dataclass(frozen=True)
class RetryPolicy:
    """When to try a failed delivery again, and when to give up (tenacity's strategies).

    Parameters
    ----------
    max_attempts : int
        Attempts before an item is dead-lettered (``stop_after_attempt``).
    base_seconds : float
        The first retry waits ``base`` plus a random jitter in ``[0, base]``.
    max_seconds : float
        Cap of the exponential part.

    Notes
    -----
    After attempt ``n`` failed, the next is due after
    ``min(base * 2 ** (n - 1), max) + U(0, base)`` seconds
    (``tenacity.wait_exponential(multiplier=base, max=max) +
    tenacity.wait_random(0, base)``). The jitter spreads the retries of many
    notifications that failed together (a receiver outage) [1]_.

    References
    ----------
    .. [1] M. Brooker, "Exponential Backoff And Jitter", AWS Architecture Blog,
       2015, https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/

    Examples
    --------
    >>> p = RetryPolicy(max_attempts=4, base_seconds=1.0, max_seconds=5.0)
    >>> [1.0 <= p.delay(1) <= 2.0, 4.0 <= p.delay(3) <= 5.0, 5.0 <= p.delay(9) <= 6.0]
    [True, True, True]
    >>> p.exhausted(3), p.exhausted(4)
    (False, True)
    """

    max_attempts: int
    base_seconds: float
    max_seconds: float
    _wait: Any = field(init=False, repr=False, compare=False)
    _stop: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base_seconds <= 0 or self.max_seconds <= 0:
            raise ValueError("max_attempts must be >= 1 and the backoff seconds > 0")
        wait = (tenacity.wait_exponential(multiplier=self.base_seconds, max=self.max_seconds)
                + tenacity.wait_random(0, self.base_seconds))
        object.__setattr__(self, "_wait", wait)
        object.__setattr__(self, "_stop", tenacity.stop_after_attempt(self.max_attempts))

    @staticmethod
    def _state(attempts: int) -> tenacity.RetryCallState:
        state = tenacity.RetryCallState(retry_object=None, fn=None, args=(), kwargs={})
        state.attempt_number = attempts
        return state

    def delay(self, attempts: int) -> float:
        """Seconds to wait after ``attempts`` failed attempts."""
        return float(self._wait(self._state(attempts)))

    def exhausted(self, attempts: int) -> bool:
        """Whether ``attempts`` attempts are all an item gets."""
        return bool(self._stop(self._state(attempts)))


@dataclass(frozen=True)
class NewItem:
    """A notification to enqueue."""

    id: str
    receiver_id: str
    receiver_kind: str
    incident_id: str
    action: str
    body: str  # JSON, without credentials
    created_at: float
    due: float


@dataclass(frozen=True)
class Guard:
    """The decision an enqueue commits with (compare-and-set on ``key``'s ``v``).

    ``state`` None deletes ``key``; ``schedule_at`` None removes ``member`` from
    ``schedule_key``; ``ttl_seconds`` 0 keeps ``key`` forever.
    """

    key: str
    version: str
    state: dict[str, str] | None
    schedule_key: str
    member: str
    schedule_at: float | None
    ttl_seconds: int = 0


@dataclass(frozen=True)
class OutboxItem:
    """A stored notification."""

    id: str
    receiver_id: str
    receiver_kind: str
    incident_id: str
    action: str
    body: str
    state: str
    attempts: int
    created_at: float
    due: float
    last_error: str
    finished_at: float | None

    @classmethod
    def from_redis(cls, item_id: str, raw: dict[bytes, bytes] | list[bytes]) -> OutboxItem:
        if isinstance(raw, list):
            raw = dict(zip(raw[::2], raw[1::2], strict=True))
        f = {k.decode(): v.decode() for k, v in raw.items()}
        return cls(id=item_id, receiver_id=f["receiver_id"], receiver_kind=f["receiver_kind"],
                   incident_id=f["incident_id"], action=f["action"], body=f["body"],
                   state=f.get("state", "pending"), attempts=int(f.get("attempts") or 0),
                   created_at=float(f["created_at"]), due=float(f.get("due") or 0),
                   last_error=f.get("last_error", ""),
                   finished_at=float(f["finished_at"]) if f.get("finished_at") else None)

    def view(self) -> dict[str, Any]:
        """The item as ``GET /v1/notifications`` shows it (body parsed)."""
        return {"id": self.id, "receiver_id": self.receiver_id, "receiver_kind": self.receiver_kind,
                "incident_id": self.incident_id, "action": self.action, "state": self.state,
                "attempts": self.attempts, "created_at": self.created_at,
                "due_at": self.due if self.state == "pending" else None,
                "finished_at": self.finished_at, "last_error": self.last_error or None,
                "body": json.loads(self.body)}


class Outbox:
    """The outbox over a ``redis.asyncio`` client client.

    Parameters
    ----------
    r : service.runtime.redis_client.Client
    retention : timedelta
        How long a delivered or dead item stays readable.
    keep : int
        At most this many delivered (and dead) items are listed.
    """

    def __init__(self, r: Client, retention: timedelta = RETENTION, keep: int = KEEP) -> None:
        self.r = r
        self.retention = retention
        self.keep = keep
        self._commit = r.register_script(_COMMIT)
        self._claim = r.register_script(_CLAIM)
        self._finish = r.register_script(_FINISH)
        self._later = r.register_script(_LATER)
        self._slot = r.register_script(_SLOT)

    async def commit(self, guard: Guard, items: list[NewItem]) -> bool:
        """Apply ``guard`` and enqueue ``items`` atomically; False (nothing written)
        when the guarded state changed since it was read."""
        payload = [{"id": i.id, "queue": outbox_queue_key(i.receiver_id, i.incident_id),
                    "index": incident_index_key(i.incident_id), "fields": {
            "receiver_id": i.receiver_id, "receiver_kind": i.receiver_kind,
            "incident_id": i.incident_id, "action": i.action, "body": i.body, "state": "pending",
            "attempts": "0", "created_at": repr(i.created_at), "due": repr(i.due), "last_error": ""}}
            for i in items]
        done = await self._commit(
            keys=[guard.key, guard.schedule_key, OUTBOX_DUE, outbox_index_key("pending")],
            args=[guard.version, "delete" if guard.state is None else "set",
                  json.dumps(guard.state or {}), guard.ttl_seconds, guard.member,
                  "" if guard.schedule_at is None else repr(guard.schedule_at),
                  json.dumps(payload), ITEM_PREFIX])
        return bool(done)

    async def claim(self, now: float, lease_seconds: float, limit: int, token: str) -> list[OutboxItem]:
        """Items due at ``now``, leased to ``token`` until ``now + lease_seconds``."""
        flat = await self._claim(keys=[OUTBOX_DUE], args=[repr(now), repr(now + lease_seconds), limit, token,
                                                   ITEM_PREFIX])
        out = []
        for i in range(0, len(flat), 2):
            if flat[i + 1]:
                out.append(OutboxItem.from_redis(flat[i].decode(), flat[i + 1]))
            else:  # lost its hash: nothing to send
                await self.r.zrem(OUTBOX_DUE, flat[i])
        return out

    async def finish(self, item: OutboxItem, token: str, state: OutboxState, now: float,
                     attempts: int, error: str = "") -> bool:
        """Mark a claimed item delivered or dead; False when the claim was lost."""
        return bool(await self._finish(
            keys=[ITEM_PREFIX + item.id, OUTBOX_DUE, outbox_queue_key(item.receiver_id, item.incident_id),
                  outbox_index_key("pending"), outbox_index_key(state), incident_index_key(item.incident_id)],
            args=[item.id, token, state, repr(now), error, attempts,
                  int(self.retention.total_seconds()), self.keep, ITEM_PREFIX]))

    async def later(self, item: OutboxItem, token: str, due: float, attempts: int, error: str) -> bool:
        """Put a claimed item back, due at ``due``; False when the claim was lost."""
        return bool(await self._later(keys=[ITEM_PREFIX + item.id, OUTBOX_DUE],
                                      args=[item.id, token, repr(due), attempts, error]))

    async def take_slot(self, receiver_id: str, per_window: int, window_seconds: float, now: float,
                        member: str) -> float | None:
        """Take one of the receiver's ``per_window`` sends in any ``window_seconds``;
        None when taken, else when a slot frees (Unix seconds)."""
        free = await self._slot(keys=[ratelimit_key(receiver_id)],
                                args=[repr(now), per_window, repr(window_seconds), member])
        value = float(free)
        return None if value == 0 else value

    async def next_due(self) -> float | None:
        """The earliest due (or lease end) of any item, or None when nothing is pending."""
        first = await self.r.zrange(OUTBOX_DUE, 0, 0, withscores=True)
        return first[0][1] if first else None

    async def counts(self) -> dict[str, int]:
        """Items per state (delivered and dead: those still listed)."""
        async with self.r.pipeline(transaction=False) as p:
            for s in STATES:
                p.zcard(outbox_index_key(s))
            got = await p.execute()
        return dict(zip(STATES, map(int, got), strict=True))

    async def get(self, item_id: str) -> OutboxItem | None:
        raw = await self.r.hgetall(ITEM_PREFIX + item_id)
        return OutboxItem.from_redis(item_id, raw) if raw else None

    async def list(self, state: OutboxState | None, limit: int, offset: int = 0) -> list[OutboxItem]:
        """Items newest first (pending by creation, finished by finishing time); all
        states merged when ``state`` is None."""
        states = STATES if state is None else (state,)
        ranked: list[tuple[float, str]] = []
        for s in states:
            got = await self.r.zrevrange(outbox_index_key(s), 0, offset + limit - 1, withscores=True)
            ranked += [(score, i.decode()) for i, score in got]
        ranked.sort(reverse=True)
        ids = [i for _score, i in ranked[offset:offset + limit]]
        async with self.r.pipeline(transaction=False) as p:
            for i in ids:
                p.hgetall(ITEM_PREFIX + i)
            raws = await p.execute()
        return [OutboxItem.from_redis(i, raw) for i, raw in zip(ids, raws, strict=True) if raw]

    async def for_incident(self, incident_id: str) -> list[OutboxItem]:
        """Every notification of one incident still kept, oldest first, however many the
        outbox holds (its own index, not a scan of the newest). Ids whose hash expired
        leave the index."""
        ids = [i.decode() for i in await self.r.zrange(incident_index_key(incident_id), 0, -1)]
        async with self.r.pipeline(transaction=False) as p:
            for i in ids:
                p.hgetall(ITEM_PREFIX + i)
            raws = await p.execute()
        gone = [i for i, raw in zip(ids, raws, strict=True) if not raw]
        if gone:
            await self.r.zrem(incident_index_key(incident_id), *gone)
        return [OutboxItem.from_redis(i, raw) for i, raw in zip(ids, raws, strict=True) if raw]
