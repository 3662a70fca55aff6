"""Redis store: model configs, reference and window profiles, aggregator
checkpoints, window-closed events and detector results.

Key layout (model keys hash-tagged ``{model_id}`` for Redis Cluster):

==================================  ==============================================
``fw:models``                       SET of model ids
``fw:{m}:config``                   JSON :class:`ModelConfig`
``fw:{m}:ref``                      reference profile (bytes)
``fw:{m}:edges``                    the reference's bin edges per numeric feature (MessagePack,
                                    :mod:`sketches.bins`), written with the reference
``fw:{m}:idx``                      ZSET ``"{len}:{start}:{version}"`` by start
``fw:{m}:p:{len}:{start}:{ver}``    closed window or rollup profile (bytes, expires after
                                    its granularity's retention)
``fw:{m}:idx:{len}``                ZSET rollups of ``len`` seconds (1 h, 1 d) by start
``fw:agg:{topic}:{partition}``      HASH: epoch, offset, watermarks, open partial profiles
``fw:{m}:pending``                  ZSET closed windows the alert policy has not applied
``fw:windows``                      STREAM of window-closed events (model, member)
``fw:{m}:status``                    HASH the detector's per-model counters: ``evaluated``,
                                    ``skipped:{reason}``, ``records``, ``abandoned``,
                                    ``last_window``, ``last_window_start``, ``last_baseline``,
                                    ``last_evaluated_at``, ``last_fdr_window`` (its gate
                                    record: ``service.alerting.store``)
``fw:{m}:counted``                  ZSET windows already counted in ``status``, by start
                                    (a window evaluated twice counts once)
``fw:implicit``                     SET of the models created implicitly (by records of a
                                    model never registered)
``fw:implicit:{minute}``            models created implicitly in that minute (expires)
``fw:{m}:counts``                   HASH member -> record count: the dashboard's cache of the
                                    counts of closed windows (profiles never change once closed)
``fw:{m}:heat:{member}``            JSON the window's heatmap cells (:func:`heat_cells`), written
                                    with its results and expiring with them
``fw:fleet:columns``                HASH model -> JSON :class:`ModelColumns` (owner, tier, window
                                    length, upstream sources), written with the configuration
``fw:fleet:latest``                 HASH model -> JSON :class:`LatestWindow`: its latest window
                                    with results (member, start, status), written with them
==================================  ==============================================

The three last keys are the fleet overview's index: what it filters and sorts on for every
model is read in one round trip (``fw:models`` and the two ``fw:fleet:`` hashes) instead
of one command per model.

Alerts, alert series and incidents: ``service.alerting.store``; the FDR gate:
``service.alerting.fdr``; silences: ``service.alerting.silences``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
import orjson
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ClusterDownError, MasterDownError, OutOfMemoryError, ReadOnlyError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from detectors.config import DetectorConfig
from detectors.policy.learned import LearnedFloors
from service import metrics
from service.registry import ModelConfig
from service.stored import Unreadable, encode_stored, read_stored
from sketches.bins import edge_set_from_bytes, edge_set_to_bytes
from sketches.profile import WindowProfile
from sketches.window import WindowGrid

log = logging.getLogger(__name__)

MODELS = "fw:models"
#: Record counts cached per model (``fw:{m}:counts``) before the oldest are dropped, and
#: how many windows' counts are kept then (the sparklines show ``ui_recent_windows``).
COUNTS_TRIM_AT, COUNTS_KEPT = 2_048, 1_024
FLEET_COLUMNS = "fw:fleet:columns"
FLEET_LATEST = "fw:fleet:latest"
#: Errors that mean Redis cannot serve now (down, unreachable, loading, failing over, out of
#: memory) rather than a wrong request: the API answers them 503 with Retry-After.
UNAVAILABLE: tuple[type[Exception], ...] = (
    RedisConnectionError, RedisTimeoutError, ClusterDownError, TryAgainError, MasterDownError,
    ReadOnlyError, OutOfMemoryError,
)
#: Prefix of an open window's field in a partition checkpoint (``service.profiles.aggregator``).
OPEN_FIELD = b"open:"
#: Field of a partition checkpoint counting one model's records dead-lettered under one
#: reason (other than late and future, counted in ``late:{m}`` and ``fut:{m}``).
DEAD_FIELD = "dl:"
WINDOWS_STREAM = "fw:windows"
IMPLICIT = "fw:implicit"
IMPLICIT_RATE_SECONDS = 60


def config_key(m: str) -> str:
    return f"fw:{{{m}}}:config"


def reference_key(m: str) -> str:
    return f"fw:{{{m}}}:ref"


def edges_key(m: str) -> str:
    return f"fw:{{{m}}}:edges"


def floors_key(m: str) -> str:
    """JSON of the floors learned from the model's reference (``LearnedFloors.to_dict``)."""
    return f"fw:{{{m}}}:floors"


def index_key(m: str, granularity: int | None = None) -> str:
    """The model's index of closed windows (``granularity`` None), or of its rollups of
    ``granularity`` seconds."""
    return f"fw:{{{m}}}:idx" if granularity is None else f"fw:{{{m}}}:idx:{granularity}"


def window_member(window_seconds: int, start: int, version: str) -> str:
    return f"{window_seconds}:{start}:{version}"


def parse_member(member: str) -> tuple[int, int, str]:
    length, start, version = member.split(":", 2)
    return int(length), int(start), version


def counts_key(m: str) -> str:
    """HASH member -> record count of the model's closed windows (a cache of the profiles')."""
    return f"fw:{{{m}}}:counts"


def heat_key(m: str, member: str) -> str:
    """JSON heatmap cells of one window's results (:func:`heat_cells`)."""
    return f"fw:{{{m}}}:heat:{member}"


def pending_key(m: str) -> str:
    """ZSET of the model's closed windows not yet through the alert policy, by start."""
    return f"fw:{{{m}}}:pending"


def profile_key(m: str, member: str) -> str:
    return f"fw:{{{m}}}:p:{member}"


def _covers(grid: WindowGrid | None, granularity: int, lo: int, hi: int) -> bool:
    """Does a rollup period of ``granularity`` start at ``lo`` and end by ``hi``?"""
    if grid is None:
        return hi - lo >= granularity and lo % granularity == 0
    start, length = grid.rollup(granularity).window_at(lo)
    return start == lo and lo + length <= hi


def partition_key(topic: str, partition: int) -> str:
    return f"fw:agg:{topic}:{partition}"


# Atomically: check the fencing epoch, update the partition checkpoint (offset,
# watermarks, open partial profiles) and publish closed windows (profile, index,
# pending for the alert policy, window-closed event).
_CHECKPOINT = """
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] then return 0 end
local ttl = ARGV[2]
local i = 3
local n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]); i = i + 2 end
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do redis.call('HDEL', KEYS[1], ARGV[i]); i = i + 1 end
n = tonumber(ARGV[i]); i = i + 1
for j = 1, n do
  redis.call('SET', KEYS[1 + 3 * j], ARGV[i + 3], 'EX', ttl)
  redis.call('ZADD', KEYS[2 + 3 * j], ARGV[i + 2], ARGV[i + 1])
  redis.call('ZADD', KEYS[3 + 3 * j], ARGV[i + 2], ARGV[i + 1])
  redis.call('SADD', KEYS[2], ARGV[i])
  redis.call('XADD', KEYS[3], '*', 'model', ARGV[i], 'member', ARGV[i + 1])
  i = i + 4
end
return 1
"""


# Admit models met in records: known ones (registered or created before) pass; new ones
# are created (added to both sets) while the per-minute and total budgets last. With
# ARGV[4] = '1' all or nothing: if one is refused, none is created.
# Returns one code per id: 0 known, 1 created, 2 refused (per minute), 3 refused (total).
_ADMIT = """
local total = redis.call('SCARD', KEYS[2])
local used = tonumber(redis.call('GET', KEYS[3]) or '0')
local max_total, per_minute = tonumber(ARGV[1]), tonumber(ARGV[2])
local out, new, refused = {}, {}, false
for i = 5, #ARGV do
  local m = ARGV[i]
  if redis.call('SISMEMBER', KEYS[1], m) == 1 or redis.call('SISMEMBER', KEYS[2], m) == 1 then
    out[#out + 1] = 0
  elseif total + #new >= max_total then
    out[#out + 1] = 3; refused = true
  elseif used + #new >= per_minute then
    out[#out + 1] = 2; refused = true
  else
    new[#new + 1] = m; out[#out + 1] = 1
  end
end
if refused and ARGV[4] == '1' then return out end
for _, m in ipairs(new) do
  redis.call('SADD', KEYS[2], m)
  redis.call('SADD', KEYS[1], m)
end
if #new > 0 then
  redis.call('INCRBY', KEYS[3], #new)
  redis.call('EXPIRE', KEYS[3], ARGV[3])
end
return out
"""
ADMIT_OUTCOMES = ("known", "created", "refused_rate", "refused_total")

# Count one window's evaluation in the model's status hash once: KEYS status, counted;
# ARGV member, start, forget-before, n, then n field/increment pairs, then field/value
# pairs to set.
_COUNT_WINDOW = """
local n = tonumber(ARGV[4])
if redis.call('ZADD', KEYS[2], 'NX', ARGV[2], ARGV[1]) == 1 then
  for i = 5, 4 + 2 * n, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[3])
for i = 5 + 2 * n, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
"""
# Store one window's results and its heatmap cells (same expiry), and make it the model's
# latest window in the fleet index unless a later one (by start, then member) is there
# already: windows evaluated out of order (replicas, a redelivered event) never move it
# back. With the window's record count (ARGV[8], '' when unknown) it is cached in the
# model's counts; past COUNTS_TRIM_AT cached counts, those of all but the index's newest
# COUNTS_KEPT windows are dropped. KEYS: results, heat, fleet latest, counts, index.
# ARGV: results JSON, ttl, heat JSON, model, start, member, latest JSON, count.
_PUT_RESULTS = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SET', KEYS[2], ARGV[3], 'EX', ARGV[2])
if ARGV[8] ~= '' then
  redis.call('HSET', KEYS[4], ARGV[6], ARGV[8])
  if redis.call('HLEN', KEYS[4]) > COUNTS_TRIM_AT then
    local keep = {}
    for _, m in ipairs(redis.call('ZRANGE', KEYS[5], -COUNTS_KEPT, -1)) do keep[m] = true end
    for _, m in ipairs(redis.call('HKEYS', KEYS[4])) do
      if not keep[m] then redis.call('HDEL', KEYS[4], m) end
    end
  end
end
local raw = redis.call('HGET', KEYS[3], ARGV[4])
local start = tonumber(ARGV[5])
if raw then
  local old = cjson.decode(raw)
  if old.start > start or (old.start == start and old.member > ARGV[6]) then return 0 end
end
redis.call('HSET', KEYS[3], ARGV[4], ARGV[7])
return 1
"""

# Fill in a model's fleet columns from the configuration read earlier (ARGV[2], '' for
# none) unless it changed since or the columns are there: put_model_config writes both
# at once, so a repair never overwrites newer columns. KEYS: columns hash, config.
# ARGV: model, config as read, columns JSON.
_FILL_COLUMNS = """
if (redis.call('GET', KEYS[2]) or '') ~= ARGV[2] then return 0 end
return redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[3])
"""
#: Characters special in a Redis glob pattern (escaped to match a model id literally).
_GLOB_SPECIAL = str.maketrans({c: "\\" + c for c in "*?[]\\^"})


def status_key(m: str) -> str:
    return f"fw:{{{m}}}:status"


def model_keys_pattern(m: str) -> str:
    """The SCAN pattern of every key of model ``m`` (``fw:{m}:*``, the id taken literally)."""
    return f"fw:{{{m.translate(_GLOB_SPECIAL)}}}:*"


@dataclass(frozen=True)
class DeletedModel:
    """What :meth:`Store.delete_model` removed."""

    existed: bool
    keys: int


@dataclass
class PartitionCheckpoint:
    """What the aggregator persisted for one partition."""

    epoch: int
    offset: int | None = None
    fields: dict[str, bytes] = field(default_factory=dict)


def dead_field(model_id: str, reason: str) -> str:
    """The partition checkpoint's field counting a model's records dead-lettered under ``reason``.

    Examples
    --------
    >>> dead_field("fraud v2", "not_finite")
    'dl:["fraud v2", "not_finite"]'
    """
    return DEAD_FIELD + json.dumps([model_id, reason])


@dataclass(frozen=True)
class DroppedRecords:
    """Records of one model the aggregators dead-lettered, ever: by event time, and by
    reason (late and future included, under ``late`` and ``future_event_time``)."""

    late: int = 0  # for a window that had closed
    future: int = 0  # more than ``max_future_seconds`` ahead of the aggregator's clock
    by_reason: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelColumns:
    """What the fleet overview shows, filters and sorts of one model's configuration."""

    owner: str | None = None
    tier: int = 2
    window_seconds: int = 300
    sources: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: ModelConfig) -> ModelColumns:
        return cls(config.owner, config.tier, config.window_seconds,
                   tuple(sorted({d.source for d in config.features.values() if d.source})))

    def to_json(self) -> bytes:
        return orjson.dumps([self.owner, self.tier, self.window_seconds, self.sources])

    @classmethod
    def from_json(cls, raw: bytes) -> ModelColumns:
        owner, tier, seconds, sources = orjson.loads(raw)
        return cls(owner, tier, seconds, tuple(sources))


#: Status of a window from its results (``window_status``).
OK, INSUFFICIENT = "ok", "insufficient traffic"


@dataclass(frozen=True)
class LatestWindow:
    """A model's latest window with test results: its index member, start (Unix seconds)
    and status: ``"insufficient traffic"`` when every test had too little data (or
    failed), else ``"ok"``."""

    member: str
    start: int
    status: str

    def to_json(self) -> bytes:
        return orjson.dumps({"member": self.member, "start": self.start, "status": self.status})

    @classmethod
    def from_json(cls, raw: bytes) -> LatestWindow:
        d = orjson.loads(raw)
        return cls(d["member"], int(d["start"]), d["status"])


def window_status(results: list[dict[str, Any]]) -> str:
    """``"insufficient traffic"`` when no test of the window was decided (every one had
    too little data, or failed), else ``"ok"``.

    Examples
    --------
    >>> window_status([{"status": "insufficient_data"}, {"status": "error"}])
    'insufficient traffic'
    >>> window_status([{"status": "insufficient_data"}, {"status": "ok"}])
    'ok'
    """
    statuses = {r["status"] for r in results}
    return INSUFFICIENT if statuses <= {"insufficient_data", "error"} else OK


_RANK = {"ok": 0, "inconclusive": 1, "drift": 2, "breach": 3}


def heat_cells(results: list[dict[str, Any]]) -> dict[str, tuple[float | None, str]]:
    """Per feature of one window's results (window-level tests left out): the largest
    |effect| / floor of its checks (None when none has both) and the worst of their
    states: ``breach`` (drift with the effect at or past its floor), ``drift``,
    ``inconclusive`` (sketch error), ``ok``.

    Examples
    --------
    >>> heat_cells([{"feature": "x", "check": "psi", "status": "drift", "effect_size": 0.5, "floor": 0.2},
    ...             {"feature": "x", "check": "ks", "status": "drift", "effect_size": 0.1, "floor": 0.2},
    ...             {"feature": "y", "check": "psi", "status": "ok", "effect_size": None, "floor": 0.2},
    ...             {"feature": "", "check": "volume", "status": "drift", "effect_size": 1.0, "floor": 0.5}])
    {'x': (2.5, 'breach'), 'y': (None, 'ok')}
    """
    best: dict[str, float | None] = {}
    state: dict[str, str] = {}
    for r in results:
        f = r["feature"]
        if f == "":
            continue
        e, fl = r.get("effect_size"), r.get("floor") or 0.0
        rt = float(abs(e) / fl) if e is not None and fl > 0 else None  # numpy scalars too
        status = r["status"]
        flag = (("breach" if rt is not None and rt >= 1 else "drift") if status == "drift"
                else ("inconclusive" if status == "inconclusive" else "ok"))
        old = best.get(f)
        best[f] = rt if old is None else (old if rt is None else max(old, rt))
        if f not in state or _RANK[flag] > _RANK[state[f]]:
            state[f] = flag
    return {f: (best[f], state[f]) for f in best}


@dataclass(frozen=True)
class FleetIndex:
    """What the fleet overview reads of every model in one round trip: the model ids, their
    configuration's columns (the defaults when they have none) and their latest window
    with results (absent: none yet)."""

    models: list[str]
    columns: dict[str, ModelColumns]
    latest: dict[str, LatestWindow]


@dataclass(frozen=True)
class ClosedWindow:
    model_id: str
    member: str
    start: int
    profile: bytes


class Store:
    """Async Redis access for all roles.

    Parameters
    ----------
    url : str
        ``redis://host:port/db``.
    """

    def __init__(self, url: str) -> None:
        # A dropped connection (Redis restarted, failover) is retried on a fresh one;
        # every write below is idempotent, so a retried command changes nothing.
        self.r = aioredis.Redis.from_url(
            url, socket_timeout=10, socket_connect_timeout=5,
            retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 3),
            retry_on_error=[RedisConnectionError, RedisTimeoutError],
        )
        self._checkpoint = self.r.register_script(_CHECKPOINT)
        self._admit = self.r.register_script(_ADMIT)
        self._count_window = self.r.register_script(_COUNT_WINDOW)
        self._put_results = self.r.register_script(
            _PUT_RESULTS.replace("COUNTS_TRIM_AT", str(COUNTS_TRIM_AT))
            .replace("COUNTS_KEPT", str(COUNTS_KEPT)))
        self._fill_columns = self.r.register_script(_FILL_COLUMNS)

    async def close(self) -> None:
        await self.r.aclose()

    async def ping(self) -> bool:
        return bool(await self.r.ping())

    # -- models -----------------------------------------------------------------
    async def put_model_config(self, model_id: str, config: ModelConfig) -> None:
        """Store a model's configuration, with its columns in the fleet index (one
        transaction)."""
        async with self.r.pipeline(transaction=True) as p:
            p.set(config_key(model_id), encode_stored(config))
            p.hset(FLEET_COLUMNS, model_id, ModelColumns.of(config).to_json())
            p.sadd(MODELS, model_id)
            await p.execute()

    async def model_configs(self, model_ids: Iterable[str],
                            role: str = "api") -> dict[str, ModelConfig | Unreadable | None]:
        """Each model's stored configuration: None when it has none, :class:`Unreadable`
        (logged and counted under ``role``) when it does not parse."""
        ids = list(model_ids)
        if not ids:
            return {}
        raw = await self.r.mget([config_key(m) for m in ids])
        return {
            m: None if v is None else read_stored(ModelConfig, v, role=role, kind="model", key=m)
            for m, v in zip(ids, raw, strict=True)
        }

    async def admit_models(self, model_ids: Iterable[str], per_minute: int, max_total: int,
                           now: float, all_or_nothing: bool = False) -> dict[str, str]:
        """Admit the models of some records: registered (or already created) models pass,
        a model never seen is created implicitly while the budgets last.

        Parameters
        ----------
        model_ids : iterable of str
        per_minute, max_total : int
            Models that may be created implicitly per wall-clock minute and ever
            (``implicit_models_per_minute``, ``implicit_models_max``).
        now : float
            Unix seconds (picks the minute).
        all_or_nothing : bool
            Create none if one is refused (an ingest request is all or nothing).

        Returns
        -------
        dict of str to str
            Per model: ``known``, ``created``, ``refused_rate`` or ``refused_total``
            (created and refused ones counted on ``fleetwatch_implicit_models_total``).
        """
        ids = list(dict.fromkeys(model_ids))
        if not ids:
            return {}
        minute = int(now // IMPLICIT_RATE_SECONDS)
        codes = await self._admit(keys=[MODELS, IMPLICIT, f"{IMPLICIT}:{minute}"],
                                  args=[max_total, per_minute, 2 * IMPLICIT_RATE_SECONDS,
                                        int(all_or_nothing), *ids])
        out = {m: ADMIT_OUTCOMES[int(c)] for m, c in zip(ids, codes, strict=True)}
        refused = any(o.startswith("refused") for o in out.values())
        for o in out.values():
            if o != "known" and not (o == "created" and refused and all_or_nothing):
                metrics.IMPLICIT_MODELS.labels(outcome=o).inc()
        return out

    async def model_config_dicts(self, model_ids: list[str]) -> dict[str, dict[str, Any] | None]:
        """The stored configurations as plain data, unvalidated (they were validated when
        stored): for reading a few fields of every model cheaply (the dashboard's overview),
        about ten times faster than :meth:`model_configs` at 1,000 models. A configuration
        that is not a JSON object reads as ``{}`` (the defaults); :meth:`model_configs`
        logs and counts it."""
        if not model_ids:
            return {}
        raw = await self.r.mget([config_key(m) for m in model_ids])
        out: dict[str, dict[str, Any] | None] = {}
        for m, v in zip(model_ids, raw, strict=True):
            try:
                parsed = None if v is None else orjson.loads(v)
            except orjson.JSONDecodeError:
                parsed = {}
            out[m] = parsed if parsed is None or isinstance(parsed, dict) else {}
        return out

    async def delete_model(self, model_id: str) -> DeletedModel:
        """Forget a model: every key under ``fw:{m}:`` (configuration, detector
        configuration, reference and its bin edges, window and rollup profiles and their indexes, pending
        windows, results, cached baselines, alert-policy series, cohorts, joined
        predictions, label counters, status) and its place in the model sets.

        Alerts (``fw:alert:{id}``) and incidents are fleet-wide history and are kept, as
        are the aggregator's checkpoints: records of the model still in flight (open
        windows, the topic's backlog) create it again as an implicit model.
        """
        existed = await self.model_exists(model_id)
        # A model id may hold "}:", so ``fw:{a}:*`` also matches the keys of model "a}:b":
        # those are left to their own model.
        others = tuple(f"fw:{{{m}}}:".encode() for m in await self.models()
                       if m != model_id and m.startswith(f"{model_id}}}:"))
        n = 0
        batch: list[bytes] = []
        async for key in self.r.scan_iter(match=model_keys_pattern(model_id), count=1_000):
            if others and key.startswith(others):
                continue
            batch.append(key)
            if len(batch) >= 1_000:
                n += await self.r.unlink(*batch)
                batch = []
        if batch:
            n += await self.r.unlink(*batch)
        async with self.r.pipeline(transaction=True) as p:
            p.srem(MODELS, model_id)
            p.srem(IMPLICIT, model_id)
            p.hdel(FLEET_COLUMNS, model_id)
            p.hdel(FLEET_LATEST, model_id)
            await p.execute()
        return DeletedModel(existed, n)

    async def count_window(self, model_id: str, member: str, start: int, increments: dict[str, int],
                           fields: dict[str, str | int | float], forget_before: int) -> None:
        """Add ``increments`` (e.g. ``evaluated`` or ``skipped:{reason}`` 1, ``records``
        the window's count) to the model's status hash once per window (a window
        evaluated again, by a restarted or a second replica, is not counted twice), and
        set ``fields`` (the last evaluated window, its baseline, ...). Windows starting
        before ``forget_before`` are no longer remembered as counted."""
        args: list[Any] = [member, start, forget_before, len(increments)]
        for k, n in increments.items():
            args += [k, n]
        for k, v in fields.items():
            args += [k, v]
        await self._count_window(keys=[status_key(model_id), f"fw:{{{model_id}}}:counted"], args=args)

    async def model_status(self, model_id: str) -> dict[str, str]:
        """The model's status hash (see :meth:`count_window`)."""
        return {k.decode(): v.decode() for k, v in (await self.r.hgetall(status_key(model_id))).items()}

    async def models(self) -> list[str]:
        return sorted(m.decode() for m in await self.r.smembers(MODELS))

    async def model_exists(self, model_id: str) -> bool:
        return bool(await self.r.sismember(MODELS, model_id))

    # -- reference profiles -------------------------------------------------------
    async def put_reference(self, model_id: str, profile: WindowProfile,
                            floors: LearnedFloors | None = None) -> None:
        """Store a reference profile, its bin edges and the floors learned from it (None:
        none, any stored ones are removed) in one transaction."""
        async with self.r.pipeline(transaction=True) as p:
            p.set(reference_key(model_id), profile.to_bytes())
            p.set(edges_key(model_id), edge_set_to_bytes(profile.edge_set()))
            if floors is None:
                p.delete(floors_key(model_id))
            else:
                p.set(floors_key(model_id), json.dumps(floors.to_dict()))
            p.sadd(MODELS, model_id)
            await p.execute()

    async def edge_sets(self, model_ids: Iterable[str]) -> dict[str, dict[str, np.ndarray]]:
        """Each model's bin edges (empty when it has no reference, or when the stored edges do
        not decode: its windows then have no bins and the tests use the digests)."""
        ids = list(model_ids)
        if not ids:
            return {}
        out = {}
        for m, v in zip(ids, await self.r.mget([edges_key(m) for m in ids]), strict=True):
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
        raw = await self.r.get(reference_key(model_id))
        if raw is None:
            return None
        try:
            return WindowProfile.from_bytes(raw)
        except Exception as exc:  # corrupt bytes fail in zlib, msgpack or the format check alike
            metrics.CONFIG_ERRORS.labels(role=role, kind="reference").inc()
            log.error("stored reference profile of %r does not decode (%s: %s); %s ignores it until "
                      "it is replaced", model_id, type(exc).__name__, exc, role)
            return None

    async def learned_floors(self, model_id: str, role: str = "api") -> LearnedFloors | None:
        """The floors learned from the model's reference; None when there are none, or
        when the stored ones do not read back (counted as
        ``fleetwatch_config_errors_total{kind="floors"}`` under ``role``: the configured
        floors apply until a new upload replaces them)."""
        raw = await self.r.get(floors_key(model_id))
        if raw is None:
            return None
        try:
            return LearnedFloors.from_dict(json.loads(raw))
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
            metrics.CONFIG_ERRORS.labels(role=role, kind="floors").inc()
            log.error("stored learned floors of %r do not read back (%s: %s); %s uses the configured "
                      "floors", model_id, type(exc).__name__, exc, role)
            return None

    # -- window profiles ----------------------------------------------------------
    async def window_members(self, model_id: str, start: float | str, end: float | str,
                             granularity: int | None = None) -> list[str]:
        """Index members of windows (or rollups of ``granularity`` s) with
        ``start <= window start <= end``."""
        index = index_key(model_id, granularity)
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
            await self.r.zrem(index_key(model_id, granularity), *expired)
        return [WindowProfile.from_bytes(b) for b in raw if b is not None]

    async def window_profile(self, model_id: str, member: str) -> WindowProfile | None:
        raw = await self.r.get(profile_key(model_id, member))
        return None if raw is None else WindowProfile.from_bytes(raw)

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
            fields={k.decode(): v for k, v in raw.items()},
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
    ) -> bool:
        """Atomically persist a partition's state and publish its closed windows.

        Returns
        -------
        bool
            False if another aggregator has taken the partition (fenced out).
        """
        keys = [partition_key(topic, partition), MODELS, WINDOWS_STREAM]
        args: list[Any] = [epoch, retention_seconds, len(updates)]
        for k, v in updates.items():
            args += [k, v]
        args.append(len(deletes))
        args += deletes
        args.append(len(closed))
        for w in closed:
            keys += [profile_key(w.model_id, w.member), index_key(w.model_id),
                     pending_key(w.model_id)]
            args += [w.model_id, w.member, w.start, w.profile]
        return bool(await self._checkpoint(keys=keys, args=args))

    async def dropped_records(self, topic: str, model_ids: list[str]) -> dict[str, DroppedRecords]:
        """Records of each model dead-lettered as late or as too far in the future, over
        the partitions of ``topic`` (the aggregator persists both counts with each
        partition's checkpoint, fields ``late:{m}`` and ``fut:{m}``)."""
        keys = [k async for k in self.r.scan_iter(match=f"fw:agg:{topic}:*", count=1_000)]
        late, future = dict.fromkeys(model_ids, 0), dict.fromkeys(model_ids, 0)
        fields = [f"{prefix}{m}" for prefix in ("late:", "fut:") for m in model_ids]
        for key in keys if model_ids else []:
            values = await self.r.hmget(key, fields)
            for m, v, f in zip(model_ids, values[:len(model_ids)], values[len(model_ids):], strict=True):
                late[m] += int(v or 0)
                future[m] += int(f or 0)
        return {m: DroppedRecords(late[m], future[m]) for m in model_ids}

    async def dead_letters(self, topic: str, model_id: str) -> DroppedRecords:
        """Records of one model dead-lettered by the aggregators of ``topic``, ever, by
        reason (fields ``late:{m}``, ``fut:{m}`` and :func:`dead_field` of the partitions'
        checkpoints); reasons with none are left out."""
        by_time = (metrics.LATE, metrics.FUTURE_EVENT_TIME)
        reasons = [r for r in metrics.DEAD_LETTER_REASONS if r not in by_time]
        names = [f"late:{model_id}", f"fut:{model_id}"] + [dead_field(model_id, r) for r in reasons]
        totals = dict.fromkeys([metrics.LATE, metrics.FUTURE_EVENT_TIME, *reasons], 0)
        async for key in self.r.scan_iter(match=f"fw:agg:{topic}:*", count=1_000):
            for reason, v in zip(totals, await self.r.hmget(key, names), strict=True):
                totals[reason] += int(v or 0)
        return DroppedRecords(totals[metrics.LATE], totals[metrics.FUTURE_EVENT_TIME],
                              {r: n for r, n in totals.items() if n})

    async def existing_models(self, model_ids: list[str]) -> set[str]:
        """The ids of ``model_ids`` in the model list (registered, or created by records)."""
        if not model_ids:
            return set()
        hits = await self.r.smismember(MODELS, model_ids)
        return {m for m, hit in zip(model_ids, hits, strict=True) if hit}

    async def open_windows(self, topic: str, model_id: str) -> int:
        """Windows of the model open in the aggregators of ``topic``, as of their last
        checkpoint: the distinct (length, start) of the partitions' ``open:`` fields
        (``open:[model, version, length, start]``, written by ``service.profiles.aggregator``)."""
        windows: set[tuple[int, int]] = set()
        async for key in self.r.scan_iter(match=f"fw:agg:{topic}:*", count=1_000):
            for name in await self.r.hkeys(key):
                if name.startswith(OPEN_FIELD):
                    m, _version, length, start = json.loads(name[len(OPEN_FIELD):])
                    if m == model_id:
                        windows.add((int(length), int(start)))
        return len(windows)

    # -- window-closed events -------------------------------------------------------
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
        return [
            (eid, {k.decode(): v.decode() for k, v in fields.items()})
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
        """Window-closed events not yet evaluated (acknowledged events are deleted)."""
        return int(await self.r.xlen(WINDOWS_STREAM))

    # -- detector results ---------------------------------------------------------------
    async def put_results(self, model_id: str, member: str, results: list[dict[str, Any]],
                          retention_seconds: int, count: int | None = None) -> None:
        """Store the test results of one window (served by the drift API) with its heatmap
        cells, and make it the model's latest window in the fleet index unless a later
        window is there (one atomic script: the index never names results not stored).
        ``count``: the window's record count, cached for the dashboard's volume charts
        (:meth:`window_counts_many`), so they need not read the profile."""
        start = parse_member(member)[1]
        latest = LatestWindow(member, start, window_status(results))
        await self._put_results(
            keys=[f"fw:{{{model_id}}}:res:{member}", heat_key(model_id, member), FLEET_LATEST,
                  counts_key(model_id), index_key(model_id)],
            args=[json.dumps(results, default=str), retention_seconds,
                  orjson.dumps(heat_cells(results)), model_id, start, member, latest.to_json(),
                  "" if count is None else count])

    async def results(self, model_id: str, member: str) -> list[dict[str, Any]] | None:
        raw = await self.r.get(f"fw:{{{model_id}}}:res:{member}")
        return None if raw is None else json.loads(raw)

    async def results_many(self, model_id: str, members: list[str]) -> list[list[dict[str, Any]] | None]:
        """:meth:`results` of many windows of one model in one round trip (MGET)."""
        if not members:
            return []
        raws = await self.r.mget([f"fw:{{{model_id}}}:res:{member}" for member in members])
        return [None if raw is None else json.loads(raw) for raw in raws]

    # -- detector config and baselines ------------------------------------------------
    # ``fw:{m}:detcfg``: JSON detector configuration (validated by the caller);
    # ``fw:{m}:base:{key}``: HASH ``profile`` (bytes) + ``counts`` (JSON list), a
    # merged trailing/seasonal baseline cached for ``ttl`` seconds.
    async def put_detector_config(self, model_id: str, config: DetectorConfig) -> None:
        """Store a model's detector configuration, its set fields only (and register the
        model)."""
        async with self.r.pipeline(transaction=True) as p:
            p.set(f"fw:{{{model_id}}}:detcfg", encode_stored(config, exclude_unset=True))
            p.sadd(MODELS, model_id)
            await p.execute()

    async def detector_config(self, model_id: str) -> str | None:
        """A model's detector configuration JSON, or None when it has none."""
        raw = await self.r.get(f"fw:{{{model_id}}}:detcfg")
        return None if raw is None else raw.decode()

    async def own_detector_config(self, model_id: str,
                                  role: str = "api") -> DetectorConfig | Unreadable | None:
        """A model's parsed detector configuration: None when it has none,
        :class:`Unreadable` (logged and counted under ``role``) when it does not parse."""
        raw = await self.detector_config(model_id)
        return None if raw is None else read_stored(DetectorConfig, raw, role=role, kind="detector",
                                                    key=model_id)

    async def put_cached_baseline(self, model_id: str, key: str, profile: bytes, counts: list[int],
                                  ttl: int) -> None:
        """Cache a merged baseline profile and its windows' record counts."""
        k = f"fw:{{{model_id}}}:base:{key}"
        async with self.r.pipeline(transaction=True) as p:
            p.hset(k, mapping={"profile": profile, "counts": json.dumps(counts)})
            p.expire(k, ttl)
            await p.execute()

    async def cached_baseline(self, model_id: str, key: str) -> tuple[bytes, list[int]] | None:
        """A cached merged baseline (profile bytes, window counts), or None."""
        raw = await self.r.hgetall(f"fw:{{{model_id}}}:base:{key}")
        if b"profile" not in raw:
            return None
        return raw[b"profile"], json.loads(raw[b"counts"])

    async def profiles_in(self, model_id: str, ranges: list[tuple[int, int]],
                          rollups: tuple[int, ...] = (),
                          grid: WindowGrid | None = None) -> list[WindowProfile]:
        """Profiles (all versions) whose start is in any ``[lo, hi)`` range: the closed
        windows, or -- for a range whose windows have expired -- the finest rollup of
        ``rollups`` (seconds) that covers it (a rollup merges its windows exactly): one whose
        period on ``grid`` (:meth:`WindowGrid.rollup`; UTC without one) starts at ``lo``
        and ends by ``hi``."""
        out: list[WindowProfile] = []
        for lo, hi in ranges:
            for granularity in (None, *rollups):
                if granularity is not None and not _covers(grid, granularity, lo, hi):
                    continue
                members = await self.window_members(model_id, lo, f"({hi}", granularity)
                found = await self.window_profiles(model_id, members, granularity)
                if found:
                    out += found
                    break
        return out

    # -- reads of the dashboard ------------------------------------------------------------
    async def fleet_index(self) -> FleetIndex:
        """Every model with its columns and latest window with results, in one round trip.

        Models whose columns are missing (configurations stored before the index existed)
        get them from their configuration, written back for the next read; a model
        without a configuration has the defaults' columns."""
        async with self.r.pipeline(transaction=False) as p:
            p.smembers(MODELS)
            p.hgetall(FLEET_COLUMNS)
            p.hgetall(FLEET_LATEST)
            ids_raw, cols_raw, latest_raw = await p.execute()
        ids = sorted(m.decode() for m in ids_raw)
        columns = {k.decode(): ModelColumns.from_json(v) for k, v in cols_raw.items()}
        latest = {k.decode(): LatestWindow.from_json(v) for k, v in latest_raw.items()}
        missing = [m for m in ids if m not in columns]
        if missing:
            columns |= await self._fill_fleet_columns(missing)
        return FleetIndex(ids, columns, latest)

    async def _fill_fleet_columns(self, model_ids: list[str]) -> dict[str, ModelColumns]:
        raws = await self.r.mget([config_key(m) for m in model_ids])
        out = {}
        async with self.r.pipeline(transaction=False) as p:
            for m, raw in zip(model_ids, raws, strict=True):
                got = None if raw is None else read_stored(ModelConfig, raw, role="api", kind="model", key=m)
                out[m] = ModelColumns.of(got) if isinstance(got, ModelConfig) else ModelColumns()
                await self._fill_columns(keys=[FLEET_COLUMNS, config_key(m)],
                                         args=[m, raw or b"", out[m].to_json()], client=p)
            await p.execute()
        return out

    async def latest_members(self, model_ids: list[str], n: int = 1) -> dict[str, list[tuple[str, int]]]:
        """Per model, its ``n`` latest closed windows (member, start), oldest first, in
        one round trip."""
        async with self.r.pipeline(transaction=False) as p:
            for m in model_ids:
                p.zrange(index_key(m), -n, -1, withscores=True)
            got = await p.execute()
        return {m: [(k.decode(), int(s)) for k, s in rows] for m, rows in zip(model_ids, got, strict=True)}

    async def recent_and_heat(
        self, models: list[tuple[str, str | None]], n: int
    ) -> tuple[dict[str, list[tuple[str, int]]], dict[str, dict[str, tuple[float | None, str]]]]:
        """Per (model, member of its latest window with results, or None): its ``n`` latest
        closed windows (member, start; oldest first) and that window's heatmap cells
        (:func:`heat_cells`; empty when none or expired), in one round trip."""
        async with self.r.pipeline(transaction=False) as p:
            for m, member in models:
                p.zrange(index_key(m), -n, -1, withscores=True)
                if member is not None:
                    p.get(heat_key(m, member))
            got = iter(await p.execute())
        recent, heat = {}, {}
        for m, member in models:
            recent[m] = [(k.decode(), int(s)) for k, s in next(got)]
            raw = next(got) if member is not None else None
            heat[m] = {} if raw is None else {f: (r, st) for f, (r, st) in orjson.loads(raw).items()}
        return recent, heat

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

    async def results_each(self, pairs: list[tuple[str, str]]) -> list[list[dict[str, Any]] | None]:
        """:meth:`results` of (model, member) pairs of any models, in one round trip (decoded
        with orjson: the dashboard reads many windows' results per page)."""
        async with self.r.pipeline(transaction=False) as p:
            for m, member in pairs:
                p.get(f"fw:{{{m}}}:res:{member}")
            raws = await p.execute()
        return [None if raw is None else orjson.loads(raw) for raw in raws]
