"""Reference and window profiles in Redis: write, read, select by time, cache baselines."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass

import msgpack
import numpy as np

from detectors.policy.learned import LearnedFloors
from detectors.volume_shape import DailyShape
from service import metrics
from service.profiles.keys import (
    MODELS,
    baseline_key,
    counts_key,
    edges_key,
    floors_key,
    parse_member,
    profile_key,
    reference_key,
    shape_key,
    window_index_key,
)
from service.runtime.redis_client import Client, mget
from sketches.bins import edge_set_from_bytes, edge_set_to_bytes
from sketches.profile import WindowProfile
from sketches.window import WindowGrid

log = logging.getLogger("service.profiles.store")


def _covers(grid: WindowGrid | None, granularity: int, lo: int, hi: int) -> bool:
    """Does a rollup period of ``granularity`` start at ``lo`` and end by ``hi``?"""
    if grid is None:
        return hi - lo >= granularity and lo % granularity == 0
    start, length = grid.rollup(granularity).window_at(lo)
    return start == lo and lo + length <= hi


@dataclass(frozen=True)
class BaselineReads:
    """What :meth:`WindowStore.baseline_reads` read in one round trip."""

    reference: WindowProfile | None
    floors: LearnedFloors | None
    cached: dict[str, tuple[bytes, list[int]]]
    shape: DailyShape | None = None


class WindowStore:
    """The profile half of :class:`~service.profiles.store.Store`: a model's reference and its
    closed windows' and rollups' profiles."""

    r: Client

    # -- reference profiles -------------------------------------------------------
    async def put_reference(self, model_id: str, profile: WindowProfile,
                            floors: LearnedFloors | None = None, shape: DailyShape | None = None) -> None:
        """Store a reference profile, its bin edges, the floors learned from it and the daily
        shape of its event times (None: none, any stored ones are removed) in one
        transaction (the model's hash slot), then list the model."""
        async with self.r.pipeline(transaction=True) as p:
            p.set(reference_key(model_id), profile.to_bytes())
            p.set(edges_key(model_id), edge_set_to_bytes(profile.edge_set()))
            for key, value in ((floors_key(model_id), floors), (shape_key(model_id), shape)):
                if value is None:
                    p.execute_command("DEL", key)  # queued on a cluster too
                else:
                    p.set(key, json.dumps(value.to_dict()))
            await p.execute()
        await self.r.sadd(MODELS, model_id)

    async def edge_sets(self, model_ids: Iterable[str]) -> dict[str, dict[str, np.ndarray]]:
        """Each model's bin edges (empty when it has no reference, or when the stored edges do
        not decode: its windows then have no bins and the tests use the digests)."""
        ids = list(model_ids)
        if not ids:
            return {}
        out = {}
        for m, v in zip(ids, await mget(self.r, [edges_key(m) for m in ids]), strict=True):
            try:
                out[m] = {} if v is None else edge_set_from_bytes(v)
            except (ValueError, TypeError, AttributeError, msgpack.UnpackException):
                out[m] = {}
        return out

    async def reference(self, model_id: str, role: str = "api") -> WindowProfile | None:
        """The model's reference profile; None when it has none, or when the stored bytes do
        not decode (logged and counted as ``fleetwatch_config_errors_total{kind="reference"}``
        under ``role``: the model's tests then use the baselines that need no reference, and
        a new upload with ``replace`` repairs it)."""
        return self._decode_reference(model_id, await self.r.get(reference_key(model_id)), role)

    def _decode_reference(self, model_id: str, raw: bytes | None, role: str) -> WindowProfile | None:
        if raw is None:
            return None
        try:
            return WindowProfile.from_bytes(raw)
        except Exception as exc:  # corrupt bytes fail in the decompressor, msgpack or the format check alike
            metrics.CONFIG_ERRORS.labels(role=role, kind="reference").inc()
            log.error("stored reference profile of %r does not decode (%s: %s); %s ignores it until "
                      "it is replaced", model_id, type(exc).__name__, exc, role)
            return None

    async def learned_floors(self, model_id: str, role: str = "api") -> LearnedFloors | None:
        """The floors learned from the model's reference; None when there are none, or
        when the stored ones do not read back (counted as
        ``fleetwatch_config_errors_total{kind="floors"}`` under ``role``: the configured
        floors apply until a new upload replaces them)."""
        return self._decode_floors(model_id, await self.r.get(floors_key(model_id)), role)

    def _decode_floors(self, model_id: str, raw: bytes | None, role: str) -> LearnedFloors | None:
        if raw is None:
            return None
        try:
            return LearnedFloors.from_dict(json.loads(raw))
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
            metrics.CONFIG_ERRORS.labels(role=role, kind="floors").inc()
            log.error("stored learned floors of %r do not read back (%s: %s); %s uses the configured "
                      "floors", model_id, type(exc).__name__, exc, role)
            return None

    async def daily_shape(self, model_id: str, role: str = "api") -> DailyShape | None:
        """The daily shape of the reference's event times; None when there is none, or when
        the stored one does not read back (counted as
        ``fleetwatch_config_errors_total{kind="shape"}`` under ``role``: the volume test
        then uses the line through the trailing windows)."""
        return self._decode_shape(model_id, await self.r.get(shape_key(model_id)), role)

    def _decode_shape(self, model_id: str, raw: bytes | None, role: str) -> DailyShape | None:
        if raw is None:
            return None
        try:
            return DailyShape.from_dict(json.loads(raw))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            metrics.CONFIG_ERRORS.labels(role=role, kind="shape").inc()
            log.error("stored daily shape of %r does not read back (%s: %s); %s leaves it out",
                      model_id, type(exc).__name__, exc, role)
            return None

    # -- window profiles ----------------------------------------------------------
    async def window_members(self, model_id: str, start: float | str, end: float | str,
                             granularity: int | None = None) -> list[str]:
        """Index members of windows (or rollups of ``granularity`` s) with
        ``start <= window start <= end``."""
        index = window_index_key(model_id, granularity)
        return [m.decode() for m in await self.r.zrangebyscore(index, start, end)]

    async def window_profiles(self, model_id: str, members: list[str],
                              granularity: int | None = None) -> list[WindowProfile]:
        """The stored profiles of ``members``; members whose profile expired
        (retention) leave the index."""
        if not members:
            return []
        raw = await self.r.mget([profile_key(model_id, m) for m in members])
        expired = [m for m, b in zip(members, raw, strict=True) if b is None]
        if expired:
            await self.r.zrem(window_index_key(model_id, granularity), *expired)
        return [WindowProfile.from_bytes(b) for b in raw if b is not None]

    async def window_profile(self, model_id: str, member: str) -> WindowProfile | None:
        raw = await self.r.get(profile_key(model_id, member))
        return None if raw is None else WindowProfile.from_bytes(raw)

    async def put_cached_baseline(self, model_id: str, key: str, profile: bytes, counts: list[int],
                                  ttl: int) -> None:
        """Cache a merged baseline profile and its windows' record counts."""
        k = baseline_key(model_id, key)
        async with self.r.pipeline(transaction=True) as p:
            p.hset(k, mapping={"profile": profile, "counts": json.dumps(counts)})
            p.expire(k, ttl)
            await p.execute()

    async def baseline_reads(self, model_id: str, reference: bool, cache_keys: list[str],
                             role: str = "detector") -> BaselineReads:
        """In one round trip: the reference's daily shape, the reference profile and its
        learned floors (when ``reference``), and the cached merged baselines of
        ``cache_keys`` (profile bytes and window counts, :meth:`put_cached_baseline`). A
        stored reference, floors or shape that do not decode are counted and read as None
        (as :meth:`reference`, :meth:`learned_floors`, :meth:`daily_shape`)."""
        async with self.r.pipeline(transaction=False) as p:
            p.get(shape_key(model_id))
            if reference:
                p.get(reference_key(model_id))
                p.get(floors_key(model_id))
            for key in cache_keys:
                p.hgetall(baseline_key(model_id, key))
            got = await p.execute()
        shape, got = self._decode_shape(model_id, got[0], role), got[1:]
        ref = floors = None
        if reference:
            ref = self._decode_reference(model_id, got[0], role)
            floors = self._decode_floors(model_id, got[1], role) if ref is not None else None
            got = got[2:]
        cached = {k: (raw[b"profile"], json.loads(raw[b"counts"]))
                  for k, raw in zip(cache_keys, got, strict=True) if b"profile" in raw}
        return BaselineReads(ref, floors, cached, shape)

    async def profiles_in(self, model_id: str, ranges: list[tuple[int, int]],
                          rollups: tuple[int, ...] = (),
                          grid: WindowGrid | None = None) -> list[WindowProfile]:
        """Profiles (all versions) whose start is in any ``[lo, hi)`` range: the closed
        windows, or -- for a range whose windows have expired -- the finest rollup of
        ``rollups`` (seconds) that covers it (a rollup merges its windows exactly): one whose
        period on ``grid`` (:meth:`WindowGrid.rollup`; UTC without one) starts at ``lo``
        and ends by ``hi``. The closed windows of every range are read in two round trips
        (the index, then the profiles)."""
        if not ranges:
            return []
        async with self.r.pipeline(transaction=False) as p:
            for lo, hi in ranges:
                p.zrangebyscore(window_index_key(model_id), lo, f"({hi}")
            per_range = [[m.decode() for m in ms] for ms in await p.execute()]
        found = await self.window_profiles(model_id, [m for ms in per_range for m in ms])
        starts = {p.window_start for p in found}
        out = list(found)
        for (lo, hi), members in zip(ranges, per_range, strict=True):
            if any(parse_member(m)[1] in starts for m in members):
                continue
            for granularity in rollups:  # expired windows: the finest rollup that covers the range
                if not _covers(grid, granularity, lo, hi):
                    continue
                members = await self.window_members(model_id, lo, f"({hi}", granularity)
                rolled = await self.window_profiles(model_id, members, granularity)
                if rolled:
                    out += rolled
                    break
        return out

    async def counts_in(self, model_id: str, ranges: list[tuple[int, int]]) -> dict[int, int]:
        """Record count per window start (model versions summed) of the closed windows
        whose start is in any ``[lo, hi)`` range: the index in one round trip, then the
        counts (:meth:`window_counts_many`, cached per window). Expired windows are left out."""
        if not ranges:
            return {}
        async with self.r.pipeline(transaction=False) as p:
            for lo, hi in ranges:
                p.zrangebyscore(window_index_key(model_id), lo, f"({hi}")
            members = sorted({m.decode() for ms in await p.execute() for m in ms})
        out: dict[int, int] = {}
        for member, count in zip(members, await self.window_counts(model_id, members), strict=True):
            if count is not None:
                start = parse_member(member)[1]
                out[start] = out.get(start, 0) + count
        return out

    async def latest_members(self, model_ids: list[str], n: int = 1) -> dict[str, list[tuple[str, int]]]:
        """Per model, its ``n`` latest closed windows (member, start), oldest first, in
        one round trip."""
        async with self.r.pipeline(transaction=False) as p:
            for m in model_ids:
                p.zrange(window_index_key(m), -n, -1, withscores=True)
            got = await p.execute()
        return {m: [(k.decode(), int(s)) for k, s in rows] for m, rows in zip(model_ids, got, strict=True)}

    async def window_counts(self, model_id: str, members: list[str]) -> list[int | None]:
        """Record counts of one model's closed windows (:meth:`window_counts_many`)."""
        return (await self.window_counts_many({model_id: members}))[model_id]

    async def window_counts_many(self, members: dict[str, list[str]]) -> dict[str, list[int | None]]:
        """Record counts of closed windows per model (None: expired), in one round trip
        once cached: ``fw:{m}:counts`` (HASH member -> count) keeps the count of each
        profile read once -- a closed window's profile never changes, so its count is read
        from the profile only the first time. Cached members no longer in the model's
        index are dropped when new ones are added."""
        models = [m for m, ms in members.items() if ms]
        async with self.r.pipeline(transaction=False) as p:
            for m in models:
                p.hmget(counts_key(m), members[m])
            cached = dict(zip(models, await p.execute(), strict=True))
        out: dict[str, list[int | None]] = {m: [] for m in members}
        for m in models:
            missing = [k for k, c in zip(members[m], cached[m], strict=True) if c is None]
            found: dict[str, int] = {}
            if missing:
                raws = await self.r.mget([profile_key(m, k) for k in missing])
                found = {k: WindowProfile.from_bytes(b).count for k, b in zip(missing, raws, strict=True)
                         if b is not None}
                if found:
                    live = set(await self.window_members(m, 0, "+inf"))
                    stale = [k.decode() for k in await self.r.hkeys(counts_key(m)) if k.decode() not in live]
                    async with self.r.pipeline(transaction=True) as p:
                        p.hset(counts_key(m), mapping=found)
                        if stale:
                            p.hdel(counts_key(m), *stale)
                        await p.execute()
            out[m] = [int(c) if c is not None else found.get(k)
                      for k, c in zip(members[m], cached[m], strict=True)]
        return out
