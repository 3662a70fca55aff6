"""The fleet FDR gate's state in Redis (``detectors.fdr.epoch`` does the arithmetic).

Keys, per epoch ``e`` (expire after 8 epochs):

============================  =================================================
``{fw}:fdr:{e}:grant``        HASH window id -> ``"granted:rewarded:capacity"``
                              (reserved)
``{fw}:fdr:{e}:used``         HASH slot -> tests granted in the slot (a window
                              spanning k slots is granted the same in each)
``{fw}:fdr:{e}:req``          HASH slot -> tests submitted to the slot (granted
                              or not)
``{fw}:fdr:{e}:cap``          HASH slot -> the slot's capacity, fixed when the
                              slot is first touched
``{fw}:fdr:{e}:peak``         STRING the largest ``req`` of a slot of the epoch
``{fw}:fdr:{e}:disc``         HASH slot -> discoveries in the slot
``{fw}:fdr:{e}:done``         HASH window id -> discoveries (committed)
``{fw}:fdr:demand``           HASH model -> ``"tests:at"``: what its latest gated
                              window submitted to each of its slots, and when
                              (Unix s, wall clock); sizes new slots
============================  =================================================

Two families of tests are gated apart, each with its own counters, capacity and share
of ``fdr_alpha`` (q): the detector's feature, score and window tests (``features``, the
keys above, at q (1 - s)) and the label joiner's performance tests (``performance``,
``{fw}:fdr-perf:...``, at q s, s = ``fdr_performance_share``). With V_f, R_f and V_p,
R_p the false and all discoveries of each family, V / R = V_f / R + V_p / R <=
V_f / R_f + V_p / R_p, so FDR(union) <= q (1 - s) + q s = q: the guarantee is the
fleet's, whichever family an alert came from. Why apart: a tier-1 model's cohort
submits 2 tests (AUC drop, log-loss increase) per window; gated among the ~200 feature
tests of each of 200 models (capacity ~50,000) it was 2 / 50,000 of the slot's budget,
and an AUC drop of 0.18 at p 1.5e-7 missed (the default simulator's concept drifts). In
its own family it gets s q shared by the performance tests alone: the family users care
most about is not diluted by the size of the feature fleet, at a cost of s to the
features' level.

A slot's capacity is ``EpochSpending.capacity`` of the largest of this and the
``capacity_lookback_epochs`` previous epochs' ``peak``, the touching window's tests
and the fleet's declared demand: the sum over the registered models of the tests each
submits to a slot, as recorded when it was last gated, or, for a model not gated yet,
as many as the window being gated; a model not gated for the look-back's length of
wall-clock time counts nothing (:func:`declared_demand`). It is computed inside the
reserve script, so every replica sees one capacity per slot. Why the declared demand
for every new slot, not only on a cold start: peaks count what was gated, and a
backfill, a replay or a detector catching up can gate one partition's windows more
than the look-back ahead of the others'; the slots it touched first were then sized
by its own tests and the other models' windows of those slots were granted nothing.
Without any of it the first window gated sized every slot of the first epoch it
touched.

A window is gated in two idempotent steps: *reserve* (atomically claim the
window's share of its slot's capacity and read the reward; a second reserve of
the same window returns the first answer) and *commit* (record its
discoveries once). The decision in between is a pure function of the
window's p-values and the reservation, so a window evaluated twice -- by a
restarted or a concurrent replica, in any order -- gets the same decisions and
counts once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detectors.fdr.epoch import MAX_LOOKBACK_EPOCHS, EpochSpending
from service import metrics
from service.alerting.keys import FDR_USED_PATTERN, fdr_demand_key, fdr_key
from service.profiles.keys import MODELS
from service.runtime.redis_client import Client
from service.settings import Settings

EPOCHS_KEPT = MAX_LOOKBACK_EPOCHS + 1

# KEYS: grant, used, disc, req, cap, peak, then the peaks of the look-back's previous epochs
# ARGV: window id, slot, n, reward lag, ttl, span, headroom, min capacity, max capacity (0: none),
#       the fleet's declared demand (-1: not known yet)
# Returns "granted:rewarded:capacity", or "cold" (nothing written) when a slot must be sized
# and the declared demand was not given.
_RESERVE = """
local got = redis.call('HGET', KEYS[1], ARGV[1])
if got then return got end
local slot, n, span = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[6])
local lo, hi, declared = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local history = 0
for i = 7, #KEYS do history = math.max(history, tonumber(redis.call('GET', KEYS[i]) or '0')) end
local demand = math.max(n, history, declared, tonumber(redis.call('GET', KEYS[6]) or '0'))
local caps = {}
for s = slot, slot + span - 1 do
  caps[s] = tonumber(redis.call('HGET', KEYS[5], s) or '0')
  if caps[s] == 0 and declared < 0 then return 'cold' end
end
local granted, capacity = n, 0
for s = slot, slot + span - 1 do
  local cap = caps[s]
  if cap == 0 then
    cap = math.max(lo, math.ceil(tonumber(ARGV[7]) * demand))
    if hi > 0 then cap = math.min(cap, hi) end
    redis.call('HSET', KEYS[5], s, cap)
  end
  capacity = math.max(capacity, cap)
  local used = tonumber(redis.call('HGET', KEYS[2], s) or '0')
  granted = math.max(0, math.min(granted, cap - used))
end
local peak = tonumber(redis.call('GET', KEYS[6]) or '0')
for s = slot, slot + span - 1 do
  redis.call('HINCRBY', KEYS[2], s, granted)
  peak = math.max(peak, redis.call('HINCRBY', KEYS[4], s, n))
end
redis.call('SET', KEYS[6], peak)
local rewarded = 0
local disc = redis.call('HGETALL', KEYS[3])
for i = 1, #disc, 2 do
  if tonumber(disc[i]) <= slot - tonumber(ARGV[4]) then rewarded = rewarded + tonumber(disc[i + 1]) end
end
local v = granted .. ':' .. rewarded .. ':' .. capacity
redis.call('HSET', KEYS[1], ARGV[1], v)
for i = 1, 6 do redis.call('EXPIRE', KEYS[i], ARGV[5]) end
return v
"""

_COMMIT = """
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[3]) == 1 then
  redis.call('HINCRBY', KEYS[2], ARGV[2], ARGV[3])
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
  return 1
end
return 0
"""



@dataclass(frozen=True)
class GateDecision:
    """The gate's answer for one window."""

    discoveries: np.ndarray  # bool, one per p-value
    level: float  # BH level of the batch
    granted: int
    rewarded: int
    capacity: int  # of the window's slot (the largest of its slots)


#: The gate's families: the detector's tests, and the label joiner's performance tests.
FEATURES, PERFORMANCE = metrics.FDR_FAMILIES


def spending(settings: Settings, family: str = FEATURES) -> EpochSpending:
    """The deployment's gate parameters for one family of tests (``FLEETWATCH_FDR_*``;
    slot = ``window_seconds``): ``alpha`` is ``fdr_alpha`` times
    ``fdr_performance_share`` for :data:`PERFORMANCE`, times the rest for :data:`FEATURES`."""
    share = settings.fdr_performance_share
    alpha = settings.fdr_alpha * (share if family == PERFORMANCE else 1 - share)
    return EpochSpending(alpha=alpha, epoch_seconds=settings.fdr_epoch_seconds,
                         slot_seconds=settings.window_seconds,
                         headroom=settings.fdr_capacity_headroom,
                         min_tests_per_slot=settings.fdr_min_tests_per_window,
                         max_tests_per_slot=settings.fdr_max_tests_per_window,
                         reward_lag_slots=settings.fdr_reward_lag_windows,
                         capacity_lookback_epochs=settings.fdr_capacity_lookback_epochs)


class FdrGate:
    """The fleet's online FDR gate, shared by every detector replica through Redis."""

    def __init__(self, r: Client, params: EpochSpending, family: str = FEATURES) -> None:
        self.r = r
        self.params = params
        self.family = family
        self._reserve = r.register_script(_RESERVE)
        self._commit = r.register_script(_COMMIT)
        self._ttl = EPOCHS_KEPT * params.epoch_seconds

    async def gate(self, window_id: str, window_start: float, window_seconds: int,
                   p_values: Sequence[float], weights: Sequence[float] | None = None, *,
                   model_id: str | None = None) -> GateDecision:
        """Discoveries among one window's eligible p-values (BH at the batch level,
        weighted by ``weights`` when given: one per p-value, > 0).

        Idempotent per ``window_id``: the same p-values and weights give the same
        answer however often and by whichever replica the window is gated.
        ``model_id`` (None: the window is not a registered model's) records what the
        model submits, for sizing new slots (:func:`declared_demand`).
        """
        epoch, slot, span = self.params.place(window_start, window_seconds)
        n = len(p_values)
        p = self.params
        per_slot = n * max(1, p.slot_seconds // max(window_seconds, 1))
        f = self.family
        keys = [fdr_key(epoch, "grant", f), fdr_key(epoch, "used", f), fdr_key(epoch, "disc", f),
                fdr_key(epoch, "req", f), fdr_key(epoch, "cap", f), fdr_key(epoch, "peak", f),
                *(fdr_key(epoch - k, "peak", f) for k in range(1, p.capacity_lookback_epochs + 1))]
        args = [window_id, slot, n, p.reward_lag_slots, self._ttl, span, repr(p.headroom),
                p.min_tests_per_slot, p.max_tests_per_slot or 0]
        raw = await self._reserve(keys=keys, args=[*args, -1])
        if raw == b"cold":
            active = p.capacity_lookback_epochs * p.epoch_seconds
            declared = await declared_demand(self.r, model_id, per_slot, f, time.time() - active)
            raw = await self._reserve(keys=keys, args=[*args, declared])
        if model_id is not None:
            await self.r.hset(fdr_demand_key(f), model_id, f"{per_slot}:{int(time.time())}")
        granted, rewarded, capacity = (int(x) for x in raw.decode().split(":"))
        found = p.decide(p_values, granted, rewarded, capacity, span, weights)
        await self._commit(keys=[fdr_key(epoch, "done", f), fdr_key(epoch, "disc", f)],
                           args=[window_id, slot, int(found.sum()), self._ttl])
        if granted < n:
            metrics.FDR_TESTS_UNFUNDED.labels(family=f).inc(n - granted)
        used = await self.r.hget(fdr_key(epoch, "used", f), slot)
        metrics.FDR_ALPHA_WEALTH.labels(family=f).set(p.wealth(slot, int(used or 0), capacity))
        level = p.level(n, granted, rewarded, capacity, span)
        metrics.FDR_LEVEL.labels(family=f).set(level)
        metrics.FDR_CAPACITY.labels(family=f).set(capacity)
        metrics.FDR_TESTS.labels(family=f).inc(n)
        metrics.FDR_DISCOVERIES.labels(family=f).inc(int(found.sum()))
        return GateDecision(found, level, granted, rewarded, capacity)


async def declared_demand(r: Client, model_id: str | None, per_slot: int,
                          family: str = FEATURES, active_since: float = 0.0) -> int:
    """The tests the registered fleet submits to one slot of ``family``, as far as the
    gate knows.

    :data:`FEATURES`: the sum over the registered models (``fw:models``) and
    ``model_id`` of what each submitted to each of its slots when last gated
    (``{fw}:fdr:demand``), counting ``per_slot`` (the window being gated) for
    ``model_id`` and for every model not gated yet, and nothing for a model last
    gated before ``active_since`` (Unix s, wall clock: a model that went silent; an
    entry without its time, as written before, counts). :data:`PERFORMANCE`: the same over
    the models gated in that family so far (``{fw}:fdr-perf:demand``) and ``model_id``:
    only tier-1 models with label-joined checks submit to it, and counting every
    registered model would size the family's cold slots for the whole fleet (the floor
    ``fdr_min_tests_per_window`` funds the cohorts of the models not gated yet). It
    depends only on the fleet's registry and its test counts, never on p-values, so a
    capacity sized with it keeps the guarantee.
    """
    demand = fdr_demand_key(family)
    if family == PERFORMANCE:
        models = {m.decode() for m in await r.hkeys(demand)}
    else:
        models = {m.decode() for m in await r.smembers(MODELS)}
    ordered = sorted(models - {model_id})
    known = await r.hmget(demand, ordered) if ordered else []
    return per_slot + sum(_demand_of(k, per_slot, active_since) for k in known)


def _demand_of(entry: bytes | None, per_slot: int, active_since: float) -> int:
    """What one model's ``{fw}:fdr:demand`` entry adds to the declared demand: ``per_slot``
    when it has none (not gated yet) or it does not parse (counted like a new model), 0 when
    it was last gated before ``active_since``."""
    tests, _, at = (entry or b"").decode(errors="replace").partition(":")
    try:
        return 0 if at and float(at) < active_since else max(int(tests), 0)
    except ValueError:
        return per_slot


@dataclass(frozen=True)
class SlotUse:
    """One slot of an epoch as the gate recorded it."""

    slot: int
    granted: int  # tests granted (at most the capacity)
    discoveries: int
    capacity: int  # the slot's capacity, fixed when it was first touched (0: none recorded)
    submitted: int = 0  # tests submitted (granted or not: those beyond the capacity go unfunded)


async def epochs(r: Client) -> list[int]:
    """The epochs whose gate counters are still kept, oldest first."""
    return sorted({int(k.decode().split(":")[2]) async for k in r.scan_iter(match=FDR_USED_PATTERN)})


async def slot_use(r: Client, epoch: int) -> list[SlotUse]:
    """Every slot of ``epoch`` that was submitted tests or made discoveries, in order."""
    async with r.pipeline(transaction=False) as p:
        for name in ("used", "disc", "cap", "req"):
            p.hgetall(fdr_key(epoch, name))
        counters = await p.execute()
    slots = sorted({int(s) for h in counters for s in h})
    return [SlotUse(s, *(int(h.get(str(s).encode(), 0)) for h in counters)) for s in slots]
