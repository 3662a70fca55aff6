"""Label-joined cohorts in Redis: joined predictions and mergeable counters per window.

A cohort is one model's sampled predictions of one prediction window
(``detectors.performance.binary.BinaryCohort``). Redis holds it as a HASH of
counters that ``HINCRBY`` / ``HINCRBYFLOAT`` update atomically, so any number of
joiner replicas add to it without coordination and a cohort is always the sum
of its examples:

==================  ==============================================================
``pred:{k}``        predictions whose score falls in grid bin k (labeled or not)
``pos:{k}``         labeled positives in bin k; ``neg:{k}`` negatives
``tp fp tn fn``     confusion counts at the model's threshold
``ll0 ll1 ...``     float sums per label: log loss (``ll``), its square (``llq``),
                    Brier (``br``, ``brq``), score (``sc``)
==================  ==============================================================

Keys (hash-tagged by model):

==============================  ====================================================
``fw:{m}:pred:{prediction id}``  HASH ``s`` score, ``w`` window start, ``t`` event
                                 time, ``y`` label once joined; expires after twice
                                 the label horizon
``fw:{m}:coh:{window start}``    HASH cohort counters (above), kept for
                                 ``retention_hourly_seconds``
``fw:{m}:cohorts``               ZSET cohort window starts
``fw:{m}:cohstate``              HASH window start -> JSON evaluation (matured cohorts)
``fw:{m}:labelstats``            HASH joined, duplicate, relabeled, unknown, late,
                                 invalid, watermark (max prediction event time)
``fw:{m}:parked``                ZSET labels whose prediction has not been read yet,
                                 by label time (joined when the predictions catch up)
==============================  ====================================================
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis.asyncio as aioredis

from detectors.performance.binary import BinaryCohort
from detectors.performance.grid import bin_index

_FLOATS = (("log_loss_sum", "ll"), ("log_loss_sq", "llq"), ("brier_sum", "br"),
           ("brier_sq", "brq"), ("score_sum", "sc"))
_HISTOGRAMS = (("pos", "pos"), ("neg", "neg"), ("predicted", "pred"))
_CONFUSION = ("tp", "fp", "tn", "fn")
STATS = ("joined", "duplicate", "relabeled", "unknown", "late", "invalid")


def to_counters(c: BinaryCohort) -> dict[str, int | float]:
    """The non-zero counters of a cohort (its Redis form).

    Examples
    --------
    >>> c = BinaryCohort(); c.add([0.25], [1])
    >>> sorted(k for k in to_counters(c) if not k.startswith(("ll", "br", "sc")))
    ['fn', 'pos:1509']
    """
    out: dict[str, int | float] = {}
    for attr, prefix in _HISTOGRAMS:
        counts = getattr(c, attr)
        for k in np.flatnonzero(counts).tolist():
            out[f"{prefix}:{k}"] = int(counts[k])
    for name in _CONFUSION:
        if getattr(c, name):
            out[name] = getattr(c, name)
    for attr, prefix in _FLOATS:
        for label, v in enumerate(getattr(c, attr).tolist()):
            if v:
                out[f"{prefix}{label}"] = v
    return out


def from_counters(fields: dict[bytes | str, bytes | str], threshold: float) -> BinaryCohort:
    """A cohort from its Redis counters.

    Examples
    --------
    >>> c = BinaryCohort(); c.add([0.25, 0.75], [1, 0])
    >>> from_counters({k: str(v) for k, v in to_counters(c).items()}, 0.5).roc_auc().value
    0.0
    """
    c = BinaryCohort(threshold)
    hist = {prefix: getattr(c, attr) for attr, prefix in _HISTOGRAMS}
    floats = {prefix: getattr(c, attr) for attr, prefix in _FLOATS}
    for raw_key, raw_value in fields.items():
        key = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
        value = raw_value.decode() if isinstance(raw_value, bytes) else raw_value
        prefix, _, index = key.partition(":")
        if index and prefix in hist:
            hist[prefix][int(index)] = int(value)
        elif key in _CONFUSION:
            setattr(c, key, int(value))
        elif key[:-1] in floats and key[-1] in "01":
            floats[key[:-1]][int(key[-1])] = float(value)
    return c


def delta(score: float, new: int, old: int | None, threshold: float) -> dict[str, int | float]:
    """Counter increments that replace label ``old`` (None: unlabeled) by ``new`` for one
    prediction with ``score``."""
    add, sub = BinaryCohort(threshold), BinaryCohort(threshold)
    add.add([score], [new])
    if old is not None:
        sub.add([score], [old])
    out: dict[str, int | float] = dict(to_counters(add))
    for k, v in to_counters(sub).items():
        out[k] = out.get(k, 0) - v
    return {k: v for k, v in out.items() if v}


# Store a prediction once (ARGV: score, window start, event time, ttl, bin, cohort ttl).
_PREDICT = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[1], 'w', ARGV[2], 't', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('HINCRBY', KEYS[2], 'pred:' .. ARGV[5], 1)
redis.call('EXPIRE', KEYS[2], ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[2])
return 1
"""

# Join a label (ARGV: label read before, new label, then field/delta pairs) if the
# prediction's label is still the one read (else -2: read again). 1 joined, 0 duplicate.
_JOIN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local cur = redis.call('HGET', KEYS[1], 'y') or ''
if cur ~= ARGV[1] then return -2 end
if cur == ARGV[2] then redis.call('HINCRBY', KEYS[3], 'duplicate', 1) return 0 end
redis.call('HSET', KEYS[1], 'y', ARGV[2])
for i = 3, #ARGV, 2 do
  if string.find(ARGV[i + 1], '[.eE]') then
    redis.call('HINCRBYFLOAT', KEYS[2], ARGV[i], ARGV[i + 1])
  else
    redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
if cur == '' then redis.call('HINCRBY', KEYS[3], 'joined', 1)
else redis.call('HINCRBY', KEYS[3], 'relabeled', 1) end
return 1
"""


def pred_key(m: str, prediction_id: str) -> str:
    return f"fw:{{{m}}}:pred:{prediction_id}"


def cohort_key(m: str, start: int) -> str:
    return f"fw:{{{m}}}:coh:{start}"


def stats_key(m: str) -> str:
    return f"fw:{{{m}}}:labelstats"


@dataclass(frozen=True)
class Prediction:
    prediction_id: str
    score: float
    window_start: int
    event_time: float


class CohortStore:
    """Joined predictions and cohort counters over a ``redis.asyncio.Redis`` client."""

    def __init__(self, r: aioredis.Redis) -> None:
        self.r = r
        self._predict = r.register_script(_PREDICT)
        self._join = r.register_script(_JOIN)

    async def put_predictions(self, model_id: str, predictions: Iterable[Prediction],
                              ttl: int, cohort_ttl: int) -> int:
        """Store predictions not stored yet; count them into their cohorts. Returns how
        many were new (a redelivered prediction is not counted twice)."""
        preds = list(predictions)
        if not preds:
            return 0
        bins = bin_index(np.array([p.score for p in preds], dtype=np.float64)).tolist()
        async with self.r.pipeline(transaction=False) as pipe:
            for p, k in zip(preds, bins, strict=True):
                await self._predict(
                    keys=[pred_key(model_id, p.prediction_id), cohort_key(model_id, p.window_start),
                          f"fw:{{{model_id}}}:cohorts"],
                    args=[repr(p.score), p.window_start, repr(p.event_time), ttl, k, cohort_ttl],
                    client=pipe)
            pipe.hget(stats_key(model_id), "watermark")
            *created, watermark = await pipe.execute()
        top = max(p.event_time for p in preds)
        if watermark is None or float(watermark) < top:
            await self.r.hset(stats_key(model_id), "watermark", repr(top))
        return sum(int(c) for c in created)

    async def join(self, model_id: str, prediction_id: str, label: int, label_time: float,
                   threshold: float, horizon: float) -> str:
        """Join one binary label; the outcome: joined, relabeled, duplicate, late, or missing
        (no such prediction stored: the caller parks the label or counts it unknown)."""
        key = pred_key(model_id, prediction_id)
        for _ in range(8):  # another joiner relabeled it meanwhile: read again
            raw = await self.r.hmget(key, ["s", "y", "t", "w"])
            if raw[0] is None:
                return "missing"
            score, old, t, w = float(raw[0]), raw[1], float(raw[2]), int(raw[3])
            if label_time - t > horizon:
                await self.count(model_id, "late")
                return "late"
            previous = None if old is None else int(old)
            args: list[Any] = ["" if old is None else old.decode(), str(label)]
            for f, v in delta(score, label, previous, threshold).items():
                args += [f, repr(float(v)) if isinstance(v, float) else str(v)]
            got = await self._join(keys=[key, cohort_key(model_id, w), stats_key(model_id)], args=args)
            if got != -2:
                return {1: "joined" if previous is None else "relabeled", 0: "duplicate",
                        -1: "missing"}[got]
        raise RuntimeError(f"label for {prediction_id!r} kept changing under us")

    async def park(self, model_id: str, prediction_id: str, label: int, label_time: float) -> None:
        """Keep a label whose prediction has not been read yet."""
        await self.r.zadd(f"fw:{{{model_id}}}:parked",
                          {json.dumps([prediction_id, label, label_time]): label_time})

    async def unpark(self, model_id: str, upto: float) -> list[tuple[str, int, float]]:
        """Take the parked labels with label time <= ``upto``."""
        key = f"fw:{{{model_id}}}:parked"
        async with self.r.pipeline(transaction=True) as p:
            p.zrangebyscore(key, "-inf", upto)
            p.zremrangebyscore(key, "-inf", upto)
            raw, _n = await p.execute()
        return [tuple(json.loads(m)) for m in raw]

    async def count(self, model_id: str, outcome: str, n: int = 1) -> None:
        await self.r.hincrby(stats_key(model_id), outcome, n)

    async def stats(self, model_id: str) -> dict[str, float]:
        raw = await self.r.hgetall(stats_key(model_id))
        out = {k.decode(): float(v) for k, v in raw.items()}
        return {**dict.fromkeys(STATS, 0.0), **out}

    async def cohort_starts(self, model_id: str, lo: float, hi: float) -> list[int]:
        return [int(float(m)) for m in await self.r.zrangebyscore(f"fw:{{{model_id}}}:cohorts", lo, hi)]

    async def cohort(self, model_id: str, start: int, threshold: float) -> BinaryCohort:
        return from_counters(await self.r.hgetall(cohort_key(model_id, start)), threshold)

    async def evaluations(self, model_id: str) -> dict[int, dict[str, Any]]:
        raw = await self.r.hgetall(f"fw:{{{model_id}}}:cohstate")
        return {int(k): json.loads(v) for k, v in raw.items()}

    async def put_evaluation(self, model_id: str, start: int, evaluation: dict[str, Any]) -> None:
        await self.r.hset(f"fw:{{{model_id}}}:cohstate", str(start), json.dumps(evaluation))

