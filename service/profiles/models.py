"""The model registry in Redis: configurations, implicit admission, status, deletion."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from detectors.config import DetectorConfig
from service import metrics
from service.alerting.keys import model_alerts_key
from service.profiles.fleet import ModelColumns
from service.profiles.keys import (
    FLEET_COLUMNS,
    FLEET_LATEST,
    IMPLICIT,
    MODELS,
    REJECTED_FIELD,
    config_key,
    counted_key,
    detector_config_key,
    implicit_minute_key,
    model_keys_pattern,
    status_key,
    traffic_through_pattern,
)
from service.registry import ModelConfig
from service.runtime.redis_client import Client, mget
from service.stored import Unreadable, encode_stored, read_stored

log = logging.getLogger("service.profiles.store")

IMPLICIT_RATE_SECONDS = 60

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


@dataclass(frozen=True)
class DeletedModel:
    """What :meth:`Store.delete_model` removed."""

    existed: bool
    keys: int


class ModelStore:
    """The model half of :class:`~service.profiles.store.Store`: what a model is configured
    as, which models exist, and each model's status counters."""

    r: Client
    _admit: Any
    _count_window: Any

    # -- models -----------------------------------------------------------------
    async def put_model_config(self, model_id: str, config: ModelConfig) -> None:
        """Store a model's configuration, then its columns in the fleet index and its place in
        the model list (one transaction in the fleet's hash slot). The configuration is
        written first: columns missing after a crash in between are filled in from it by the
        next fleet read (:meth:`~service.profiles.fleet.FleetStore.fleet_index`)."""
        await self.r.set(config_key(model_id), encode_stored(config))
        async with self.r.pipeline(transaction=True) as p:
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
        raw = await mget(self.r, [config_key(m) for m in ids])
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
        codes = await self._admit(keys=[MODELS, IMPLICIT, implicit_minute_key(minute)],
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
        raw = await mget(self.r, [config_key(m) for m in model_ids])
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

        Alerts (``{fw}:alert:{id}``) and incidents are fleet-wide history and are kept, as
        are the aggregator's checkpoints: records of the model still in flight (open
        windows, the topic's backlog) create it again as an implicit model. The model leaves
        the fleet's closed-through sets (``{fw}:traffic:{len}:through``), so no window waits
        for it to close (:meth:`~service.profiles.traffic.TrafficStore.fleet_unsettled`); its
        records in the fleet's past windows stay until they expire (they were real traffic).
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
        through = [k async for k in self.r.scan_iter(match=traffic_through_pattern(), count=1_000)]
        async with self.r.pipeline(transaction=True) as p:
            for key in through:
                p.zrem(key, model_id)
            p.srem(MODELS, model_id)
            p.srem(IMPLICIT, model_id)
            p.hdel(FLEET_COLUMNS, model_id)
            p.hdel(FLEET_LATEST, model_id)
            p.execute_command("UNLINK", model_alerts_key(model_id))  # queued on a cluster too
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
        await self._count_window(keys=[status_key(model_id), counted_key(model_id)], args=args)

    async def count_rejected(self, rejected: Mapping[str, Mapping[str, int]]) -> None:
        """Add records refused by HTTP ingest (model -> reason -> records) to the status
        hashes (field ``rejected:<reason>``) of the models that exist: a refused record naming
        no existing model (a typo, a model refused by the implicit-model budget) is not
        counted, so refused garbage grows no counters."""
        existing = await self.existing_models(sorted(rejected))
        if not existing:
            return
        async with self.r.pipeline(transaction=False) as p:
            for m in sorted(existing):
                for reason, n in rejected[m].items():
                    p.hincrby(status_key(m), REJECTED_FIELD + reason, n)
            await p.execute()

    async def model_status(self, model_id: str) -> dict[str, str]:
        """The model's status hash (see :meth:`count_window`)."""
        return {k.decode(): v.decode() for k, v in (await self.r.hgetall(status_key(model_id))).items()}

    async def models(self) -> list[str]:
        return sorted(m.decode() for m in await self.r.smembers(MODELS))

    async def model_exists(self, model_id: str) -> bool:
        return bool(await self.r.sismember(MODELS, model_id))

    # -- detector config and baselines ------------------------------------------------
    # ``fw:{m}:detcfg``: JSON detector configuration (validated by the caller);
    # ``fw:{m}:base:{key}``: HASH ``profile`` (bytes) + ``counts`` (JSON list), a
    # merged trailing/seasonal baseline cached for ``ttl`` seconds.
    async def put_detector_config(self, model_id: str, config: DetectorConfig) -> None:
        """Store a model's detector configuration, its set fields only (and register the
        model)."""
        await self.r.set(detector_config_key(model_id), encode_stored(config, exclude_unset=True))
        await self.r.sadd(MODELS, model_id)

    async def detector_config(self, model_id: str) -> str | None:
        """A model's detector configuration JSON, or None when it has none."""
        raw = await self.r.get(detector_config_key(model_id))
        return None if raw is None else raw.decode()

    async def own_detector_config(self, model_id: str,
                                  role: str = "api") -> DetectorConfig | Unreadable | None:
        """A model's parsed detector configuration: None when it has none,
        :class:`Unreadable` (logged and counted under ``role``) when it does not parse."""
        raw = await self.detector_config(model_id)
        return None if raw is None else read_stored(DetectorConfig, raw, role=role, kind="detector",
                                                    key=model_id)

    async def existing_models(self, model_ids: list[str]) -> set[str]:
        """The ids of ``model_ids`` in the model list (registered, or created by records)."""
        if not model_ids:
            return set()
        hits = await self.r.smismember(MODELS, model_ids)
        return {m for m, hit in zip(model_ids, hits, strict=True) if hit}
