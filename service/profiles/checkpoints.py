"""The aggregators' partition checkpoints and the window-closed events they publish."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from detectors.baseline import DAY
from detectors.volume_history import FLEET_WINDOWS
from service import metrics
from service.profiles.keys import (
    MODELS,
    OPEN_FIELD,
    PUBLISH_FIELD,
    WINDOWS_STREAM,
    dead_field,
    parse_member,
    partition_key,
    partitions_pattern,
    pending_key,
    profile_key,
    traffic_field,
    traffic_key,
    traffic_through_key,
    window_index_key,
    window_looks_key,
)
from service.profiles.looks import LOOKS_KEPT_SECONDS, MAX_WINDOW_LOOKS, WindowLook
from service.runtime.redis_client import Client, run_scripts
from sketches.profile import WindowProfile

log = logging.getLogger("fleetwatch.aggregator")

# The checkpoint protocol (docs/operations.md, "Redis Cluster"): a partition's open windows
# span many models, hence many Redis Cluster hash slots, so one checkpoint is three steps,
# each atomic in one slot, each safe to repeat:
#
# 1. _CHECKPOINT, the partition's key: check the fencing epoch; update the checkpoint
#    (offset, watermarks, open partial profiles), record each window closed since the
#    last checkpoint in a ``pub:`` field (its profile), and drop the ``pub:`` fields of the
#    previous checkpoint's windows once they are verified in their models' indexes. The
#    offset moves with the closed windows' profiles, so from here nothing is lost and
#    nothing is read twice.
# 2. _PUBLISH, each closed window's model: store the profile, index it, mark it pending for
#    the alert policy, unless the model's index holds it already (a repeated step 2 after
#    the policy applied the window must not make it pending again). Answers 1 (stored
#    now), 2 (stored before, still pending) or 0 (stored before, applied by the policy).
# 3. _ANNOUNCE, the fleet's slot: list the models, append the window-closed events of the
#    windows step 2 answered 1 or 2 for.
#
# A window's ``pub:`` field outlives its publication by one checkpoint: the next checkpoint
# first reads every such window back from its model's index, publishes again any that is
# missing (a Redis Cluster failover lost the write: its master died before the replica
# had it; counted in fleetwatch_windows_republished_total) and only then drops the field.
# A crash leaves ``pub:`` fields behind; whoever acquires the partition next repeats steps 2
# and 3 for them before consuming: step 2 is a no-op for the windows already stored and
# step 3 announces again those still pending, which the detector counts and applies once
# (as an event redelivered after a detector died).
#
# Step 1 also compares the checkpoint's sequence number (field ``seq``, one more per
# checkpoint) with the one the aggregator wrote last: a different one means the key lost
# writes (a failover before replication rolled it back), and the aggregator rewrites the
# partition's whole state instead (ARGV[3] '1': every field but the epoch replaced).
_CHECKPOINT = """
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] then return 0 end
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')
if ARGV[3] == '1' then
  for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
    if f ~= 'epoch' then redis.call('HDEL', KEYS[1], f) end
  end
elseif ARGV[2] ~= '' and seq ~= tonumber(ARGV[2]) then
  return -1
end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'seq', tonumber(ARGV[2]) + 1) end
local i = 4
local n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]); i = i + 2 end
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do redis.call('HDEL', KEYS[1], ARGV[i]); i = i + 1 end
return 1
"""

# KEYS: profile, index, pending. ARGV: member, start, profile, ttl.
_PUBLISH = """
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 2 end
  return 0
end
redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
return 1
"""

# KEYS: model set, window-closed stream, then per window shorter than a day its traffic
# hash and its length's closed-through set. ARGV: per window model, member, 1 if it has those
# keys, traffic field, records, start, the traffic hash's ttl.
_ANNOUNCE = """
local k = 3
for i = 1, #ARGV, 7 do
  redis.call('SADD', KEYS[1], ARGV[i])
  if ARGV[i + 2] == '1' then
    redis.call('HSET', KEYS[k], ARGV[i + 3], ARGV[i + 4])
    redis.call('EXPIRE', KEYS[k], ARGV[i + 6])
    redis.call('ZADD', KEYS[k + 1], 'GT', ARGV[i + 5], ARGV[i])
    k = k + 2
  end
  redis.call('XADD', KEYS[2], '*', 'model', ARGV[i], 'member', ARGV[i + 1])
end
return 1
"""


def traffic_ttl(window_seconds: int) -> int:
    """How long a window's traffic hash is kept: the trailing windows the volume test reads
    it as a control for, and a day (seconds).

    Examples
    --------
    >>> traffic_ttl(3600)
    176400
    """
    return (FLEET_WINDOWS + 1) * window_seconds + DAY


@dataclass
class PartitionCheckpoint:
    """What the aggregator persisted for one partition."""

    epoch: int
    offset: int | None = None
    fields: dict[str, bytes] = field(default_factory=dict)
    seq: int = 0  # checkpoints written (the next one expects this many)


class RolledBack(Exception):
    """The partition's checkpoint in Redis is not the one this aggregator wrote last: the
    key lost writes (a failover before replication). Rewrite the whole state (``full``)."""


@dataclass(frozen=True)
class DroppedRecords:
    """Records of one model the aggregators dead-lettered, ever: by event time, and by
    reason (late and future included, under ``late`` and ``future_event_time``)."""

    late: int = 0  # for a window that had closed
    future: int = 0  # more than ``max_future_seconds`` ahead of the aggregator's clock
    by_reason: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ClosedWindow:
    """A window closed by an aggregator, until it is published (``records``: its record
    count; None: read from ``profile``)."""

    model_id: str
    member: str
    start: int
    profile: bytes
    records: int | None = None

    def record_count(self) -> int:
        return self.records if self.records is not None else WindowProfile.from_bytes(self.profile).count


def publish_field(w: ClosedWindow) -> str:
    """The partition checkpoint's field holding a closed window until it is published.

    Examples
    --------
    >>> publish_field(ClosedWindow("fraud", "300:600:v1", 600, b""))
    'pub:["fraud", "300:600:v1", 600]'
    """
    return PUBLISH_FIELD + json.dumps([w.model_id, w.member, w.start])


class CheckpointStore:
    """The aggregator half of :class:`~service.profiles.store.Store`: fenced partition
    checkpoints that publish closed windows atomically, and the ``{fw}:windows`` stream the
    detector consumes."""

    r: Client
    _checkpoint: Any
    _publish: Any
    _announce: Any

    # -- aggregator checkpoints -----------------------------------------------------
    async def acquire_partition(self, topic: str, partition: int) -> PartitionCheckpoint:
        """Take ownership of a partition: bump its fencing epoch and load its state."""
        key = partition_key(topic, partition)
        epoch = await self.r.hincrby(key, "epoch", 1)
        raw = await self.r.hgetall(key)
        offset = raw.pop(b"offset", None)
        raw.pop(b"epoch", None)
        return PartitionCheckpoint(
            epoch=epoch,
            offset=None if offset is None else int(offset),
            fields={k.decode(): v for k, v in raw.items() if k != b"seq"},
            seq=int(raw.get(b"seq", 0)),
        )

    async def checkpoint(
        self,
        topic: str,
        partition: int,
        epoch: int,
        updates: dict[str, bytes | str | int],
        deletes: list[str],
        closed: list[ClosedWindow],
        retention_seconds: int,
        published: list[ClosedWindow] | None = None,
        seq: int | None = None,
        full: bool = False,
    ) -> list[ClosedWindow] | None:
        """Persist a partition's state and publish its closed windows (the protocol above).

        Parameters
        ----------
        closed : list of ClosedWindow
            Windows closed since the last checkpoint.
        published : list of ClosedWindow, optional
            What the previous call returned: windows published by the previous checkpoint,
            verified now (published again if their model lost them) and forgotten.
        seq : int, optional
            Checkpoints of the partition written so far (``PartitionCheckpoint.seq`` plus
            the successful calls since); None: not compared.
        full : bool
            ``updates`` is the partition's whole state: replace every field with it (and
            with ``published``'s ``pub:`` fields, verified again next time).

        Raises
        ------
        RolledBack
            ``seq`` is not the stored one (nothing written): call again with the whole
            state and ``full``.

        Returns
        -------
        list of ClosedWindow or None
            None if another aggregator has taken the partition (fenced out: nothing
            written). Else the windows to pass as ``published`` next time. If this raises
            midway (Redis unavailable), calling it again with the same arguments, or
            :meth:`publish_pending` by the partition's next owner, completes it.
        """
        published = published or []
        lost = await self._missing(published)
        if lost:
            metrics.WINDOWS_REPUBLISHED.inc(len(lost))
            log.warning("partition %d: %d published window(s) missing from their models' keys (lost by "
                        "a failover before replication): published again: %s", partition, len(lost),
                        ", ".join(f"{w.model_id} {w.member}" for w in lost[:10]))
            await self._publish_closed(lost, retention_seconds)
        kept = published if full else lost  # verified again by the next checkpoint
        pub = {publish_field(w): w.profile for w in [*kept, *closed]}
        args: list[Any] = [epoch, "" if seq is None else seq, int(full), len(updates) + len(pub)]
        for k, v in (updates | pub).items():
            args += [k, v]
        drop = [] if full else [publish_field(w) for w in published if w not in lost]
        args.append(len(deletes) + len(drop))
        args += [*deletes, *drop]
        done = await self._checkpoint(keys=[partition_key(topic, partition)], args=args)
        if done == 0:
            return None
        if done == -1:
            raise RolledBack(f"partition {partition} of {topic}: checkpoint {seq} expected")
        await self._publish_closed(closed, retention_seconds)
        return [*kept, *closed]

    async def publish_pending(self, topic: str, partition: int, cp: PartitionCheckpoint,
                              retention_seconds: int) -> list[ClosedWindow]:
        """Complete the checkpoints of ``cp`` (the state just acquired): store, index and
        announce the windows of its ``pub:`` fields (steps 2 and 3); the windows (to pass
        as ``published`` to the next :meth:`checkpoint`)."""
        closed = [ClosedWindow(m, member, start, v) for name, v in cp.fields.items()
                  if name.startswith(PUBLISH_FIELD)
                  for m, member, start in [json.loads(name[len(PUBLISH_FIELD):])]]
        await self._publish_closed(closed, retention_seconds)
        return closed

    async def _missing(self, windows: list[ClosedWindow]) -> list[ClosedWindow]:
        """The windows of ``windows`` their model's index does not hold."""
        if not windows:
            return []
        async with self.r.pipeline(transaction=False) as p:
            for w in windows:
                p.zscore(window_index_key(w.model_id), w.member)
            scores = await p.execute()
        return [w for w, score in zip(windows, scores, strict=True) if score is None]

    async def _publish_closed(self, closed: list[ClosedWindow], retention_seconds: int) -> None:
        """Steps 2 and 3 of the protocol for ``closed``."""
        if not closed:
            return
        stored = await run_scripts(self.r, self._publish, [
            ([profile_key(w.model_id, w.member), window_index_key(w.model_id), pending_key(w.model_id)],
             [w.member, w.start, w.profile, retention_seconds]) for w in closed])
        announce = [w for w, n in zip(closed, stored, strict=True) if n]
        if not announce:
            return
        keys: list[str] = [MODELS, WINDOWS_STREAM]
        args: list[str | int] = []
        for w in announce:
            length, start, version = parse_member(w.member)
            counted = length < DAY
            if counted:
                keys += [traffic_key(length, start), traffic_through_key(length)]
            args += [w.model_id, w.member, int(counted), traffic_field(w.model_id, version), w.record_count(),
                     start, traffic_ttl(length)]
        await self._announce(keys=keys, args=args)

    async def dropped_records(self, topic: str, model_ids: list[str]) -> dict[str, DroppedRecords]:
        """Records of each model dead-lettered as late or as too far in the future, over
        the partitions of ``topic`` (the aggregator persists both counts with each
        partition's checkpoint, fields ``late:{m}`` and ``fut:{m}``)."""
        keys = [k async for k in self.r.scan_iter(match=partitions_pattern(topic), count=1_000)]
        late, future = dict.fromkeys(model_ids, 0), dict.fromkeys(model_ids, 0)
        fields = [f"{prefix}{m}" for prefix in ("late:", "fut:") for m in model_ids]
        for key in keys if model_ids else []:
            values = await self.r.hmget(key, fields)
            for m, v, f in zip(model_ids, values[:len(model_ids)], values[len(model_ids):], strict=True):
                late[m] += int(v or 0)
                future[m] += int(f or 0)
        return {m: DroppedRecords(late[m], future[m]) for m in model_ids}

    async def open_windows(self, topic: str, model_id: str) -> int:
        """Windows of the model open in the aggregators of ``topic``, as of their last
        checkpoint: the distinct (length, start) of the partitions' ``open:`` fields
        (``open:[model, version, length, start]``, written by ``service.profiles.aggregator``)."""
        windows: set[tuple[int, int]] = set()
        async for key in self.r.scan_iter(match=partitions_pattern(topic), count=1_000):
            for name in await self.r.hkeys(key):
                if name.startswith(OPEN_FIELD):
                    m, _version, length, start = json.loads(name[len(OPEN_FIELD):])
                    if m == model_id:
                        windows.add((int(length), int(start)))
        return len(windows)

    # -- window-closed events -------------------------------------------------------
    async def publish_looks(self, looks: list[WindowLook]) -> None:
        """Append looks at open windows (:mod:`service.profiles.looks`) to the window-event
        stream, in order, and to each window's list of looks (:meth:`window_looks`: its
        close reads them, however late a detector reads the stream's)."""
        async with self.r.pipeline(transaction=False) as p:
            for look in looks:
                fields = look.to_fields()
                p.xadd(WINDOWS_STREAM, fields)
                key = window_looks_key(look.model_id, look.member)
                p.rpush(key, fields["look"])
                p.ltrim(key, 0, MAX_WINDOW_LOOKS - 1)  # the first ones (a replay appends again)
                p.expire(key, parse_member(look.member)[0] + LOOKS_KEPT_SECONDS)
            await p.execute()

    async def forget_window_looks(self, model_id: str, member: str) -> None:
        """The window's close has been applied: its looks are no longer needed."""
        await self.r.unlink(window_looks_key(model_id, member))

    async def window_looks(self, model_id: str, member: str) -> list[WindowLook]:
        """The looks published while the window was open, oldest first; one that does not
        parse is left out (logged)."""
        out = []
        for raw in await self.r.lrange(window_looks_key(model_id, member), 0, -1):
            try:
                out.append(WindowLook.from_fields({"model": model_id, "member": member,
                                                   "look": raw.decode(errors="replace")}))
            except ValueError as exc:
                log.error("stored look of model=%s window=%s does not parse (%s): left out",
                          model_id, member, exc)
        return out

    async def ensure_event_group(self, group: str) -> None:
        try:
            await self.r.xgroup_create(WINDOWS_STREAM, group, id="0", mkstream=True)
        except aioredis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def read_events(
        self, group: str, consumer: str, count: int, block_ms: int, reclaim_idle_ms: int
    ) -> list[tuple[bytes, dict[str, str]]]:
        """New window-closed events for this consumer, plus events another
        consumer read but did not acknowledge within ``reclaim_idle_ms``."""
        reclaimed = await self.r.xautoclaim(
            WINDOWS_STREAM, group, consumer, reclaim_idle_ms, "0-0", count=count
        )
        out = list(reclaimed[1])  # Redis 6.2 answers [next, entries]; 7.x adds deleted ids
        if len(out) < count:
            resp = await self.r.xreadgroup(
                group, consumer, {WINDOWS_STREAM: ">"}, count=count - len(out), block=block_ms
            )
            for _stream, entries in resp or []:
                out += entries
        return [  # bytes that are not UTF-8 (written by hand) fail the event's parse, not the read
            (eid, {k.decode(errors="replace"): v.decode(errors="replace") for k, v in fields.items()})
            for eid, fields in out
            if fields
        ]

    async def ack_events(self, group: str, ids: list[bytes]) -> None:
        """Acknowledge evaluated events and delete them: the stream is trimmed by
        evaluation, never by length, so no event is dropped before it is read."""
        if ids:
            async with self.r.pipeline(transaction=True) as p:
                p.xack(WINDOWS_STREAM, group, *ids)
                p.xdel(WINDOWS_STREAM, *ids)
                await p.execute()

    async def pending_events(self) -> int:
        """Window events not yet handled: closed windows and looks at open ones
        (acknowledged events are deleted)."""
        return int(await self.r.xlen(WINDOWS_STREAM))

    async def dead_letters(self, topic: str, model_id: str) -> DroppedRecords:
        """Records of one model dead-lettered by the aggregators of ``topic``, ever, by
        reason (fields ``late:{m}``, ``fut:{m}`` and :func:`dead_field` of the partitions'
        checkpoints); reasons with none are left out."""
        by_time = (metrics.LATE, metrics.FUTURE_EVENT_TIME)
        reasons = [r for r in metrics.DEAD_LETTER_REASONS if r not in by_time]
        names = [f"late:{model_id}", f"fut:{model_id}"] + [dead_field(model_id, r) for r in reasons]
        totals = dict.fromkeys([metrics.LATE, metrics.FUTURE_EVENT_TIME, *reasons], 0)
        async for key in self.r.scan_iter(match=partitions_pattern(topic), count=1_000):
            for reason, v in zip(totals, await self.r.hmget(key, names), strict=True):
                totals[reason] += int(v or 0)
        return DroppedRecords(totals[metrics.LATE], totals[metrics.FUTURE_EVENT_TIME],
                              {r: n for r, n in totals.items() if n})
