"""The Redis-backed cohort store: sampled predictions, label joins, cohorts and their evaluations.

A cohort is a HASH of counters that the Lua scripts of :mod:`service.cohorts.lua`
update with ``HINCRBY`` / ``HINCRBYFLOAT``, so any number of joiner replicas
add to it without coordination; keys: :mod:`service.cohorts.keys`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from detectors.performance.binary import BinaryCohort
from service.cohorts.codec import (
    BinaryCodec,
    Codec,
    LoadedCohort,
    MulticlassCodec,
    Prediction,
    RegressionCodec,
)
from service.cohorts.counters import decode_fields, from_counters, minus
from service.cohorts.keys import (
    cohort_key,
    evaluations_key,
    parked_key,
    pred_key,
    reference_cohort_key,
    slice_state_key,
    slice_values_key,
    slices_pending_key,
    starts_key,
    stats_key,
    window_slices_key,
)
from service.cohorts.lua import ADMIT, JOIN, PREDICT, SETTLE_SLICES, script_arg
from service.cohorts.slices import slice_id
from service.runtime.redis_client import Client, run_scripts
from sketches.slices import OTHER

STATS = ("joined", "duplicate", "relabeled", "unknown", "late", "invalid")


class CohortStore:
    """Joined predictions and cohort counters over a ``redis.asyncio`` client client."""

    def __init__(self, r: Client) -> None:
        self.r = r
        self._predict = r.register_script(PREDICT)
        self._join = r.register_script(JOIN)
        self._admit = r.register_script(ADMIT)
        self._settle_slices = r.register_script(SETTLE_SLICES)

    async def _read_each(self, keys: Sequence[str], command: str, *args: Any) -> list[Any]:
        """The replies to ``command`` (a redis-py command method, e.g. ``"smembers"``) on each of
        ``keys``, ``args`` following the key, in the order of ``keys``: one pipelined round trip,
        none for no keys."""
        if not keys:
            return []
        async with self.r.pipeline(transaction=False) as pipe:
            for key in keys:
                getattr(pipe, command)(key, *args)
            return await pipe.execute()

    # -- predictions ------------------------------------------------------------
    async def admit_slices(self, model_id: str, preds: Sequence[Prediction], max_values: int,
                           stale_seconds: float) -> dict[tuple[str, str], str]:
        """The cohort value of each (key, value) of ``preds``: the value itself while
        the key has room (or already admitted it), else ``__other__``."""
        by_key: dict[str, Counter[str]] = {}
        last: dict[tuple[str, str], float] = {}
        for p in preds:
            for key, value in p.slices:
                by_key.setdefault(key, Counter())[value] += 1
                last[key, value] = max(last.get((key, value), -math.inf), p.event_time)
        out: dict[tuple[str, str], str] = {}
        for key, counts in by_key.items():
            values = sorted(counts, key=lambda v: (-counts[v], v))
            newest = max(last[key, v] for v in values)
            args: list[Any] = [max_values, repr(max(newest - stale_seconds, -1e300))]
            for v in values:
                args += [v, repr(last[key, v])]
            admitted = await self._admit(keys=[slice_values_key(model_id, key)], args=args)
            for v, ok in zip(values, admitted, strict=True):
                out[key, v] = v if int(ok) else OTHER
        return out

    async def put_predictions(self, model_id: str, predictions: Iterable[Prediction], ttl: int,
                              cohort_ttl: int, codec: Codec | None = None, *,
                              max_slice_values: int = 16, slice_stale_seconds: float = math.inf,
                              progress: float | None = None) -> int:
        """Store predictions not stored yet; count them into their window's cohort and
        their slices' cohorts. Returns how many were new (a redelivered prediction is
        not counted twice). ``codec`` defaults to binary at threshold 0.5. The model's
        watermark (latest prediction event time read) moves to ``progress`` if given,
        else to the latest of these predictions' event times, if that is later."""
        codec = codec or BinaryCodec()
        preds = [p for p in predictions if codec.accepts(p)]
        if not preds:
            return 0
        cap = await self.admit_slices(model_id, preds, max_slice_values, slice_stale_seconds) \
            if any(p.slices for p in preds) else {}
        counters = codec.prediction_counters(preds)
        calls = []
        for p, inc in zip(preds, counters, strict=True):
            sids = sorted({slice_id(k, cap[k, v]) for k, v in p.slices})
            fields = {**codec.prediction_fields(p), "w": str(p.window_start), "t": repr(p.event_time)}
            if sids:
                fields["sl"] = json.dumps(sids)
            args: list[Any] = [ttl, cohort_ttl, p.window_start, len(fields)]
            for f, v in fields.items():
                args += [f, v]
            args.append(len(inc))
            for f, v in inc.items():
                args += [f, script_arg(v)]
            args += sids
            calls.append(([pred_key(model_id, p.prediction_id), starts_key(model_id),
                           window_slices_key(model_id, p.window_start), slices_pending_key(model_id),
                           cohort_key(model_id, p.window_start),
                           *(cohort_key(model_id, p.window_start, s) for s in sids)], args))
        created = await run_scripts(self.r, self._predict, calls)
        watermark = await self.r.hget(stats_key(model_id), "watermark")
        top = max(p.event_time for p in preds) if progress is None else progress
        if watermark is None or float(watermark) < top:
            await self.r.hset(stats_key(model_id), "watermark", repr(top))
        return sum(int(c) for c in created)

    # -- labels -----------------------------------------------------------------
    async def join(self, model_id: str, prediction_id: str, label: str | int, label_time: float,
                   codec: Codec | float, horizon: float) -> str:
        """Join one label: :meth:`join_many` of one. A float ``codec`` is a binary
        model's threshold; an int label is normalised by the codec (0/1)."""
        if not isinstance(codec, BinaryCodec | MulticlassCodec | RegressionCodec):
            codec = BinaryCodec(float(codec))
        new = label if isinstance(label, str) else codec.label(label)
        return (await self.join_many(model_id, [(prediction_id, new, label_time)], codec, horizon))[0]

    async def join_many(self, model_id: str, labels: Sequence[tuple[str, str, float]], codec: Codec,
                        horizon: float) -> list[str]:
        """Join labels ``(prediction id, label as Codec.label returns it, label time)`` in
        order, a few round trips for the lot; per label the outcome: joined, relabeled,
        duplicate, late, invalid (a regression error beyond float64), or missing (no such
        prediction stored: the caller parks the label or counts it unknown). Late and
        invalid labels are counted here.

        Each label is a compare-and-set on the label its prediction held when read, so
        a label that another one (in this batch or another replica) changed meanwhile
        is read again: the last label applied wins.

        Raises
        ------
        RuntimeError
            When a label is still changing under us after eight reads.
        """
        names = ["y", "t", "w", "sl", *codec.stored]
        outcomes: list[str | None] = [None] * len(labels)
        pending = list(range(len(labels)))
        for _ in range(8):
            if not pending:
                return outcomes  # type: ignore[return-value]
            reads = await self._read_each([pred_key(model_id, labels[i][0]) for i in pending], "hmget", names)
            calls: list[tuple[int, str | None]] = []
            counted: Counter[str] = Counter()
            joins = []
            for i, values in zip(pending, reads, strict=True):
                pid, new, label_time = labels[i]
                raw = dict(zip(names, values, strict=True))
                if raw["w"] is None or any(raw[f] is None for f in codec.stored):
                    outcomes[i] = "missing"
                    continue
                if label_time - float(raw["t"]) > horizon:
                    outcomes[i] = "late"
                    counted["late"] += 1
                    continue
                stored = {f: raw[f].decode() for f in codec.stored}
                previous = None if raw["y"] is None else raw["y"].decode()
                try:
                    inc = codec.label_counters(stored, new)
                    if previous is not None:
                        inc = minus(inc, codec.label_counters(stored, previous))
                except ValueError:
                    outcomes[i] = "invalid"
                    counted["invalid"] += 1
                    continue
                if previous is None:
                    inc["nl"] = 1
                args: list[Any] = ["" if previous is None else previous, new]
                for f, v in inc.items():
                    args += [f, script_arg(v)]
                w = int(raw["w"])
                sids = json.loads(raw["sl"]) if raw["sl"] else []
                joins.append(([pred_key(model_id, pid), stats_key(model_id), cohort_key(model_id, w),
                               *(cohort_key(model_id, w, s) for s in sids)], args))
                calls.append((i, previous))
            got = await run_scripts(self.r, self._join, joins)
            if counted:
                async with self.r.pipeline(transaction=False) as pipe:
                    for outcome, n in counted.items():
                        pipe.hincrby(stats_key(model_id), outcome, n)
                    await pipe.execute()
            pending = []
            for (i, previous), g in zip(calls, got, strict=False):
                if g == -2:  # changed since read: read again
                    pending.append(i)
                else:
                    outcomes[i] = {1: "joined" if previous is None else "relabeled", 0: "duplicate",
                                   -1: "missing"}[g]
        if pending:
            raise RuntimeError(f"label for {labels[pending[0]][0]!r} kept changing under us")
        return outcomes  # type: ignore[return-value]

    async def park(self, model_id: str, prediction_id: str, label: str | int, label_time: float) -> None:
        """Keep a label whose prediction has not been read yet."""
        await self.r.zadd(parked_key(model_id), {json.dumps([prediction_id, label, label_time]): label_time})

    async def unpark(self, model_id: str, upto: float) -> list[tuple[str, str | int, float]]:
        """Take the parked labels with label time <= ``upto``."""
        key = parked_key(model_id)
        async with self.r.pipeline(transaction=True) as p:
            p.zrangebyscore(key, "-inf", upto)
            p.zremrangebyscore(key, "-inf", upto)
            raw, _n = await p.execute()
        return [tuple(json.loads(m)) for m in raw]

    async def count(self, model_id: str, outcome: str, n: int = 1) -> None:
        await self.r.hincrby(stats_key(model_id), outcome, n)

    async def stats(self, model_id: str) -> dict[str, int | float]:
        """The model's label counters (:data:`STATS`, ints) and ``watermark`` (the latest
        prediction event time read, Unix s, a float; absent before the first)."""
        raw = await self.r.hgetall(stats_key(model_id))
        out = {k.decode(): float(v) if k == b"watermark" else int(v) for k, v in raw.items()}
        return {**dict.fromkeys(STATS, 0), **out}

    async def parked(self, model_id: str) -> int:
        """Labels waiting for their prediction to be read (not joined yet)."""
        return int(await self.r.zcard(parked_key(model_id)))

    # -- cohorts ----------------------------------------------------------------
    async def cohort_starts(self, model_id: str, lo: float, hi: float) -> list[int]:
        return [int(float(m)) for m in await self.r.zrangebyscore(starts_key(model_id), lo, hi)]

    async def cohort(self, model_id: str, start: int, threshold: float) -> BinaryCohort:
        """A binary model's whole-model cohort of one window."""
        return from_counters(await self.r.hgetall(cohort_key(model_id, start)), threshold)

    async def load(self, model_id: str, start: int, codec: Codec, sid: str | None = None) -> LoadedCohort:
        """One cohort (the whole model's, or slice ``sid``'s) of one window."""
        return codec.load(decode_fields(await self.r.hgetall(cohort_key(model_id, start, sid))))

    async def put_reference_cohort(self, model_id: str, counters: dict[str, int | float],
                                   replace: bool) -> None:
        """Store (``replace``) or add to the labelled reference's cohort counters."""
        key = reference_cohort_key(model_id)
        async with self.r.pipeline(transaction=True) as p:
            if replace:
                p.execute_command("DEL", key)  # queued on a cluster too
            for field, v in counters.items():
                if isinstance(v, float):
                    p.hincrbyfloat(key, field, v)
                else:
                    p.hincrby(key, field, v)
            await p.execute()

    async def reference_cohort(self, model_id: str, codec: Codec) -> LoadedCohort | None:
        """The labelled reference's cohort, or None when none was uploaded."""
        fields = await self.r.hgetall(reference_cohort_key(model_id))
        return codec.load(decode_fields(fields)) if fields else None

    async def load_many(self, model_id: str, starts: Sequence[int], codec: Codec,
                        sid: str | None = None) -> list[LoadedCohort]:
        """:meth:`load` of several windows in one round trip."""
        raw = await self._read_each([cohort_key(model_id, s, sid) for s in starts], "hgetall")
        return [codec.load(decode_fields(f)) for f in raw]

    async def iter_load(self, model_id: str, starts: Sequence[int], codec: Codec, sid: str | None = None,
                        chunk: int = 32) -> AsyncIterator[tuple[int, LoadedCohort]]:
        """:meth:`load` of many windows, ``chunk`` per round trip, holding one chunk at a
        time (a binary cohort's hash has up to 15,000 fields)."""
        for i in range(0, len(starts), chunk):
            part = starts[i:i + chunk]
            for s, c in zip(part, await self.load_many(model_id, part, codec, sid), strict=True):
                yield s, c

    async def sizes(self, model_id: str, keys: Sequence[tuple[int, str | None]]) -> list[tuple[int, int]]:
        """(predictions, labeled) of each (window start, slice id or None) cohort, cheaply."""
        raw = await self._read_each([cohort_key(model_id, start, sid) for start, sid in keys],
                                    "hmget", ["np", "nl"])
        return [(int(a or 0), int(b or 0)) for a, b in raw]

    async def windows_pending_slices(self, model_id: str) -> list[int]:
        """Window starts with slice cohorts not judged yet."""
        return [int(float(m)) for m in await self.r.zrange(slices_pending_key(model_id), 0, -1)]

    async def settle_slices(self, model_id: str, start: int) -> bool:
        """Take the window off the pending set if all its slice cohorts are judged."""
        return bool(await self._settle_slices(
            keys=[slices_pending_key(model_id), window_slices_key(model_id, start),
                  slice_state_key(model_id, start)], args=[start]))

    async def window_slices(self, model_id: str, starts: Sequence[int]) -> dict[int, set[str]]:
        """Slice ids with a cohort in each window."""
        raw = await self._read_each([window_slices_key(model_id, s) for s in starts], "smembers")
        return {s: {m.decode() for m in members} for s, members in zip(starts, raw, strict=True)}

    async def admitted_values(self, model_id: str, keys: Sequence[str]) -> dict[str, list[str]]:
        """The values of each slice key that have cohorts of their own (besides ``__other__``)."""
        raw = await self._read_each([slice_values_key(model_id, k) for k in keys], "zrange", 0, -1)
        return {k: sorted(v.decode() for v in vals) for k, vals in zip(keys, raw, strict=True)}

    async def judged_slices(self, model_id: str,
                            starts: Sequence[int]) -> dict[int, dict[str, dict[str, Any]]]:
        """The slice cohorts judged in each window: slice id -> its stored evaluation."""
        raw = await self._read_each([slice_state_key(model_id, s) for s in starts], "hgetall")
        return {s: {k.decode(): json.loads(v) for k, v in fields.items()}
                for s, fields in zip(starts, raw, strict=True)}

    async def slice_evaluations(self, model_id: str, starts: Sequence[int],
                                sid: str) -> dict[int, dict[str, Any]]:
        """Slice ``sid``'s evaluation in each window where it was judged."""
        raw = await self._read_each([slice_state_key(model_id, s) for s in starts], "hget", sid)
        return {s: json.loads(v) for s, v in zip(starts, raw, strict=True) if v is not None}

    async def put_slice_evaluation(self, model_id: str, start: int, sid: str, evaluation: dict[str, Any],
                                   ttl: int) -> None:
        key = slice_state_key(model_id, start)
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.hset(key, sid, json.dumps(evaluation))
            pipe.expire(key, ttl)
            await pipe.execute()

    async def evaluations(self, model_id: str) -> dict[int, dict[str, Any]]:
        raw = await self.r.hgetall(evaluations_key(model_id))
        return {int(k): json.loads(v) for k, v in raw.items()}

    async def put_evaluation(self, model_id: str, start: int, evaluation: dict[str, Any]) -> None:
        await self.r.hset(evaluations_key(model_id), str(start), json.dumps(evaluation))
