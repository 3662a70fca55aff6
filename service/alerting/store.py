"""Redis state of the alert policy: series outcomes, alerts, incidents, user actions.

The keys are listed in :mod:`service.alerting.keys`. Every write is idempotent or
compare-and-set, so replicas that evaluate the same model concurrently, or a window
evaluated twice, converge to one state.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from service.alerting.keys import (
    ALERTS,
    EVENTS,
    INCIDENTS,
    OPEN,
    OPEN_INDEX,
    alert_key,
    alerting_key,
    gate_key,
    incident_key,
    incident_spans_key,
    model_alerts_key,
    quality_spans_key,
    series_key,
)
from service.alerting.silences import SilenceStore, muted_now
from service.profiles.keys import pending_key, status_key
from service.runtime.redis_client import Client

log = logging.getLogger("fleetwatch.alerting")

EVENTS_MAXLEN = 100_000
#: Incident and data-quality spans ending this long (event time) before a new alert's are forgotten.
SPAN_MEMORY_SECONDS = 8 * 86_400
#: Least number of alert ids a filtered page reads from the time index at a time.
SCAN_BATCH = 200
USER_FIELDS = ("acked_by", "acked_at", "ack_comment", "resolved_by", "resolved_at", "resolve_comment")

# Record one window's outcomes (ARGV: window start, member, then field/outcome-JSON
# pairs) and take the window off the model's pending set. An outcome at or before
# the series' settled start, or of a member already recorded, is ignored. Returns
# {seq, start of the earliest window still pending (or false), series..., abandoned}:
# windows before that start are *released* (every earlier window of the model is
# applied), so folding them gives the same episodes whatever the order of
# evaluation. A window still pending a day before the one recorded (its event was
# lost) is abandoned, so it cannot hold the model back forever.
PENDING_HORIZON_SECONDS = 86_400

_RECORD = """
for i = 3, #ARGV, 2 do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  local s = raw and cjson.decode(raw) or {settled = -1, o = {}}
  local known = tonumber(ARGV[1]) <= s.settled
  for _, o in ipairs(s.o) do if o[2] == ARGV[2] then known = true end end
  if not known then
    table.insert(s.o, cjson.decode(ARGV[i + 1]))
    redis.call('HSET', KEYS[1], ARGV[i], cjson.encode(s))
  end
end
redis.call('ZREM', KEYS[2], ARGV[2])
local abandoned = redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf',
                             '(' .. (tonumber(ARGV[1]) - PENDING_HORIZON))
local seq = redis.call('HINCRBY', KEYS[3], 'seq', 1)
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
return {seq, first[2] or false, redis.call('HGETALL', KEYS[1]), abandoned}
"""

# Forget a series' outcomes at or before ARGV[2] (they are folded into alerts).
_SETTLE = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local s = cjson.decode(raw)
local upto = tonumber(ARGV[2])
if upto == -2 then
  for _, o in ipairs(s.o) do if o[1] > upto then upto = o[1] end end
end
if upto <= s.settled then return 0 end
local kept = {}
for _, o in ipairs(s.o) do if o[1] > upto then table.insert(kept, o) end end
s.o = kept
s.settled = upto
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(s))
return 1
"""

# Compare-and-set an alert on its seq (ARGV: seq, created_at, state, JSON body); the
# first write's created_at and the incident stay. Returns 1 when created, 2 when
# updated, 3 when updated with a new state, 0 when the stored alert is newer.
_UPSERT = """
local old = redis.call('HMGET', KEYS[1], 'seq', 'state')
if old[1] then
  if tonumber(old[1]) > tonumber(ARGV[1]) then return 0 end
  redis.call('HSET', KEYS[1], 'seq', ARGV[1], 'state', ARGV[3], 'body', ARGV[4])
  if old[2] ~= ARGV[3] then return 3 end
  return 2
end
redis.call('HSET', KEYS[1], 'seq', ARGV[1], 'created_at', ARGV[2], 'state', ARGV[3], 'body', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[5])
return 1
"""

# Join the incident of a group key whose event-time span meets the alert's, or open one;
# an alert already in an incident (ARGV[9]) only widens that incident's span. KEYS: the
# group's spans HASH (incident id -> "lo:hi", event-time seconds), the incidents ZSET.
# ARGV: alert id, new incident id, incident JSON, created_at, alert span lo and hi, gap
# (spans closer than it meet), forget-before (spans ending earlier are dropped), the
# alert's incident id or "", TTL of the spans HASH. Returns the incident id.
_JOIN = """
local lo, hi, gap = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local best, blo, bhi = nil, lo, hi
local spans = redis.call('HGETALL', KEYS[1])
for i = 1, #spans, 2 do
  local a, b = string.match(spans[i + 1], '^(-?[%d.]+):(-?[%d.]+)$')
  a, b = tonumber(a), tonumber(b)
  if ARGV[9] ~= '' then
    if spans[i] == ARGV[9] then best, blo, bhi = spans[i], a, b end
  elseif b < tonumber(ARGV[8]) then
    redis.call('HDEL', KEYS[1], spans[i])
  elseif lo < b + gap and hi > a - gap
         and (best == nil or a < blo or (a == blo and spans[i] < best)) then
    best, blo, bhi = spans[i], a, b
  end
end
if best == nil then
  best = ARGV[9] ~= '' and ARGV[9] or ARGV[2]
  if ARGV[9] == '' then
    redis.call('SET', ARGV[11] .. best, ARGV[3], 'NX')
    redis.call('ZADD', KEYS[2], 'NX', ARGV[4], best)
  end
end
redis.call('HSET', KEYS[1], best, string.format('%d:%d', math.min(blo, lo), math.max(bhi, hi)))
redis.call('EXPIRE', KEYS[1], ARGV[10])
redis.call('SADD', ARGV[11] .. best .. ':alerts', ARGV[1])
return best
"""


# Open or close an alert in {fw}:open and {fw}:open:alerts at once. An alert a user resolved
# (its hash has resolved_by) is never opened again, whoever writes it later. KEYS: {fw}:open,
# {fw}:open:alerts, the alert's hash. ARGV: id, '1' to open, OpenAlert JSON, then for a
# close: field/value pairs of the user's resolution, set in the same step.
_SET_OPEN = """
if ARGV[2] == '1' and redis.call('HEXISTS', KEYS[3], 'resolved_by') == 0 then
  redis.call('SADD', KEYS[1], ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
  return 1
end
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]) end
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 0
"""


@dataclass(frozen=True)
class OpenAlert:
    """What the fleet overview reads of an alert not resolved."""

    model_id: str
    severity: str
    incident_id: str | None

    @classmethod
    def of(cls, alert: dict[str, Any]) -> OpenAlert:
        return cls(alert["model_id"], alert["severity"], alert.get("incident_id") or None)

    def to_json(self) -> bytes:
        return orjson.dumps([self.model_id, self.severity, self.incident_id])

    @classmethod
    def from_json(cls, raw: bytes) -> OpenAlert:
        return cls(*orjson.loads(raw))


@dataclass(frozen=True)
class Recorded:
    """The model's state right after recording a window."""

    seq: int  # orders the views: a larger seq saw every outcome a smaller one saw
    released_before: float  # start of the earliest window still pending (inf: none)
    series: dict[str, dict[str, Any]]  # field -> {"settled", "o"}








def series_field(feature: str, check: str) -> str:
    return f"{feature}\0{check}"


def effective_state(alert: dict[str, Any]) -> str:
    """firing / acknowledged / resolved, with the user's actions applied."""
    if alert["state"] == "resolved" or alert.get("resolved_by"):
        return "resolved"
    return "acknowledged" if alert.get("acked_by") else "firing"


class AlertStore:
    """Alert-policy state over a ``redis.asyncio`` client client.

    Every alert read (:meth:`alert`, :meth:`alerts`, :meth:`open_alerts`, the alerts of
    :meth:`incident`) comes with the user's actions applied (:func:`effective_state`) and
    with ``silenced_by`` / ``notify`` as the active silences make them now
    (:func:`service.alerting.silences.muted_now`); ``role`` names the reader in the
    counts of unreadable stored silences.
    """

    def __init__(self, r: Client, role: str = "api") -> None:
        self.r = r
        self.silences = SilenceStore(r, role=role)
        self._record = r.register_script(_RECORD.replace("PENDING_HORIZON", str(PENDING_HORIZON_SECONDS)))
        self._settle = r.register_script(_SETTLE)
        self._upsert = r.register_script(_UPSERT)
        self._join = r.register_script(_JOIN)
        self._set_open = r.register_script(_SET_OPEN)

    # -- series --------------------------------------------------------------------
    async def record(self, model_id: str, window_start: int, member: str,
                     outcomes: dict[str, list[Any]]) -> Recorded:
        """Record one window's outcome per series and release it (see ``_RECORD``)."""
        args: list[Any] = [window_start, member]
        for f, o in outcomes.items():
            args += [f, json.dumps(o)]
        seq, pending, flat, abandoned = await self._record(
            keys=[series_key(model_id), pending_key(model_id), alerting_key(model_id)],
            args=args)
        if abandoned:
            log.warning("model=%s: %d closed window(s) starting over a day before the window just "
                        "evaluated were never through the alert policy (their window-closed event was "
                        "lost, or their evaluation kept failing); the policy stops waiting for them: they "
                        "raise and resolve no alert, and the model's later windows are no longer held "
                        "back. Their profiles stay readable; GET /v1/models/%s/status counts them "
                        "(windows.abandoned)", model_id, abandoned, model_id)
            await self.r.hincrby(status_key(model_id), "abandoned", int(abandoned))
        series = {flat[i].decode(): json.loads(flat[i + 1]) for i in range(0, len(flat), 2)}
        return Recorded(int(seq), math.inf if pending is None else float(pending), series)

    async def mark_pending(self, model_id: str, member: str, window_start: int) -> None:
        """Put a window on the model's pending set (the aggregator does this when it
        publishes a closed window)."""
        await self.r.zadd(pending_key(model_id), {member: window_start})

    async def settle(self, model_id: str, field: str, upto: int | None) -> None:
        """Forget outcomes at or before ``upto`` (None: every outcome recorded so far)."""
        await self._settle(keys=[series_key(model_id)], args=[field, -2 if upto is None else upto])

    # -- alerts --------------------------------------------------------------------
    async def upsert(self, alert: dict[str, Any]) -> int:
        """Write an alert unless the stored one is newer: 1 created, 2 updated, 3 updated
        with a new state, 0 stale."""
        return int(await self._upsert(
            keys=[alert_key(alert["id"]), ALERTS, model_alerts_key(alert["model_id"])],
            args=[alert["seq"], alert["created_at"], alert["state"], json.dumps(alert), alert["id"]]))

    async def set_incident(self, alert_id: str, incident_id: str) -> None:
        await self.r.hset(alert_key(alert_id), "incident_id", incident_id)

    async def alerts_by_id(self, ids: list[str]) -> list[dict[str, Any]]:
        async with self.r.pipeline(transaction=False) as p:
            for i in ids:
                p.hgetall(alert_key(i))
            raws = await p.execute()
        out = []
        for raw in raws:
            if b"body" not in raw:
                continue
            fields = {k.decode(): v.decode() for k, v in raw.items()}
            alert = orjson.loads(fields.pop("body"))
            alert["created_at"] = float(fields.pop("created_at"))
            fields.pop("seq", None)
            fields.pop("state", None)
            alert.update(fields)
            alert["state"] = effective_state(alert)
            out.append(alert)
        if not out:
            return out
        now = time.time()
        active = await self.silences.active(now)
        return [muted_now(a, active, now) for a in out]

    async def alert(self, alert_id: str) -> dict[str, Any] | None:
        got = await self.alerts_by_id([alert_id])
        return got[0] if got else None

    async def alerts(self, model_id: str | None, since: float, limit: int, offset: int = 0,
                     keep: Callable[[dict[str, Any]], bool] | None = None) -> list[dict[str, Any]]:
        """Alerts created at or after ``since`` (Unix seconds), newest first.

        Parameters
        ----------
        model_id : str or None
            Only this model's alerts; None: every model's.
        since : float
            Creation time, Unix seconds.
        limit, offset : int
            The page: the ``offset``-th to the ``offset + limit``-th selected alert.
        keep : callable or None
            Selects the alerts to page (e.g. by state or severity); None: all.
            See :meth:`_page` for how a filter and the page combine.
        """
        index = ALERTS if model_id is None else model_alerts_key(model_id)
        return await self._page(index, since, limit, offset, self.alerts_by_id, keep)

    async def _page(self, index: str, since: float, limit: int, offset: int,
                    load: Callable[[list[str]], Awaitable[list[dict[str, Any]]]],
                    keep: Callable[[dict[str, Any]], bool] | None) -> list[dict[str, Any]]:
        """One page of the items of a time index (ZSET id -> created at), newest first.

        ``keep`` selects before ``limit`` and ``offset`` page, so a filtered page is
        short only at the end of the selection. What the filters look at (state, models)
        is not indexed -- it changes with acknowledgement, resolution and time -- so a
        filtered page reads the index in batches of at least :data:`SCAN_BATCH` ids until
        it is full. Without a filter one range of the index is read.
        """
        if keep is None:
            ids = await self.r.zrevrangebyscore(index, "+inf", since, start=offset, num=limit)
            return await load([i.decode() for i in ids])
        page: list[dict[str, Any]] = []
        skip, start, batch = offset, 0, max(SCAN_BATCH, offset + limit)
        while len(page) < limit:
            ids = await self.r.zrevrangebyscore(index, "+inf", since, start=start, num=batch)
            start += len(ids)
            for item in await load([i.decode() for i in ids]):
                if not keep(item):
                    continue
                if skip:
                    skip -= 1
                elif len(page) < limit:
                    page.append(item)
            if len(ids) < batch:
                break
        return page

    async def act(self, alert_id: str, fields: dict[str, str]) -> None:
        """Record a user's acknowledgement or resolution."""
        await self.r.hset(alert_key(alert_id), mapping=fields)

    async def emit(self, kind: str, alert_id: str, incident_id: str | None) -> None:
        """Publish a lifecycle event (fired, resolved, acknowledged) for notifiers."""
        await self.r.xadd(EVENTS, {"kind": kind, "alert_id": alert_id,
                                   "incident_id": incident_id or ""},
                          maxlen=EVENTS_MAXLEN, approximate=True)

    # -- FDR gate answers per window (the dashboard's "why did this page?") -------------
    async def put_gate(self, model_id: str, member: str, record: dict[str, Any]) -> None:
        """Keep what the gate answered for one window (:func:`service.alerting.policy.gate_record`)
        for :data:`SPAN_MEMORY_SECONDS`. Idempotent: the gate answers a window the same way
        each time it is evaluated."""
        await self.r.set(gate_key(model_id, member), json.dumps(record), ex=SPAN_MEMORY_SECONDS)

    async def gate(self, model_id: str, member: str) -> dict[str, Any] | None:
        """The gate's answer for one window, or None (not gated, or forgotten)."""
        raw = await self.r.get(gate_key(model_id, member))
        return None if raw is None else json.loads(raw)

    # -- data-quality alert spans (inhibition) ----------------------------------------
    async def quality_spans(self, model_id: str) -> dict[str, tuple[str, float, float]]:
        """The model's recent data-quality alerts: alert id -> (feature, first breach
        start, end of the last breach; ``inf`` while the alert fires), event-time seconds."""
        raw = await self.r.hgetall(quality_spans_key(model_id))
        out = {}
        for k, v in raw.items():
            feature, lo, hi = json.loads(v)
            out[k.decode()] = (feature, float(lo), math.inf if hi is None else float(hi))
        return out

    async def set_open(self, alert: dict[str, Any], is_open: bool) -> None:
        """Mark ``alert`` (as stored, with its incident) open or not, in ``{fw}:open`` and the
        overview's ``{fw}:open:alerts`` at once; an alert a user resolved stays closed."""
        await self._set_open(keys=[OPEN, OPEN_INDEX, alert_key(alert["id"])],
                             args=[alert["id"], int(is_open), OpenAlert.of(alert).to_json()])

    async def resolve(self, alert: dict[str, Any], fields: dict[str, str]) -> None:
        """Record a user's resolution (``fields``) and close the alert, in one step."""
        args: list[Any] = [alert["id"], 0, b""]
        for k, v in fields.items():
            args += [k, v]
        await self._set_open(keys=[OPEN, OPEN_INDEX, alert_key(alert["id"])], args=args)

    async def open_alerts(self) -> list[dict[str, Any]]:
        """Every alert not resolved (firing or acknowledged)."""
        ids = sorted(m.decode() for m in await self.r.smembers(OPEN))
        return [a for a in await self.alerts_by_id(ids) if a["state"] != "resolved"]

    async def open_index(self) -> dict[str, OpenAlert]:
        """Every alert not resolved, by id, as the fleet overview reads them: two commands
        whatever their number. Alerts in ``{fw}:open`` missing from ``{fw}:open:alerts``
        (opened before it existed) are read in full once and written to it (or, when a
        user resolved them, taken out of ``{fw}:open``)."""
        async with self.r.pipeline(transaction=False) as p:
            p.smembers(OPEN)
            p.hgetall(OPEN_INDEX)
            ids_raw, index_raw = await p.execute()
        ids = {m.decode() for m in ids_raw}
        out = {k.decode(): OpenAlert.from_json(v) for k, v in index_raw.items()}
        missing = sorted(ids - out.keys())
        for alert in await self.alerts_by_id(missing):
            if alert["state"] == "resolved":
                await self.resolve(alert, {})
            else:
                await self.set_open(alert, True)
                out[alert["id"]] = OpenAlert.of(alert)
        return {k: v for k, v in out.items() if k in ids}

    async def set_quality_span(self, model_id: str, alert_id: str, feature: str, lo: float,
                               hi: float | None) -> None:
        """Record a data-quality alert's event-time span (``hi`` None: still firing) and
        forget spans that ended :data:`SPAN_MEMORY_SECONDS` before this one began."""
        key = quality_spans_key(model_id)
        await self.r.hset(key, alert_id, json.dumps([feature, lo, hi]))
        stale = [a for a, (_f, _lo, end) in (await self.quality_spans(model_id)).items()
                 if end < lo - SPAN_MEMORY_SECONDS]
        if stale:
            await self.r.hdel(key, *stale)

    # -- incidents ---------------------------------------------------------------------
    async def join(self, group: str, alert_id: str, span: tuple[int, int], gap: int,
                   incident: dict[str, Any], joined: str | None = None) -> str:
        """The incident of ``group`` that ``alert_id`` belongs to, by event time.

        An alert not yet in an incident (``joined`` None) joins the incident of its
        group whose span (event-time seconds, first breach to the end of the last breach
        of its alerts) comes closer than ``gap`` to the alert's ``span``, the earliest such, or
        opens ``incident`` (whose ``id`` is new; created once whichever replica gets
        there first). An alert already in incident ``joined`` widens its span. So the
        alerts of one root cause share an incident however far apart in wall time
        their models are evaluated. Spans ending more than
        :data:`SPAN_MEMORY_SECONDS` before the alert's are forgotten.
        """
        raw = await self._join(
            keys=[incident_spans_key(group), INCIDENTS],
            args=[alert_id, incident["id"], json.dumps(incident), incident["created_at"],
                  int(span[0]), int(span[1]), int(gap), int(span[0]) - SPAN_MEMORY_SECONDS,
                  joined or "", SPAN_MEMORY_SECONDS, incident_key("")])
        return raw.decode()

    async def incident(self, incident_id: str) -> dict[str, Any] | None:
        raw = await self.r.get(incident_key(incident_id))
        if raw is None:
            return None
        ids = sorted(m.decode() for m in await self.r.smembers(f"{incident_key(incident_id)}:alerts"))
        return {**json.loads(raw), "alerts": await self.alerts_by_id(ids)}

    async def incidents(self, since: float, limit: int, offset: int = 0,
                        keep: Callable[[dict[str, Any]], bool] | None = None) -> list[dict[str, Any]]:
        """Incidents opened at or after ``since``, newest first, with their alerts; ``keep``
        selects before ``limit`` and ``offset`` page (as in :meth:`alerts`)."""
        return await self._page(INCIDENTS, since, limit, offset, self._incidents_by_id, keep)

    async def _incidents_by_id(self, ids: list[str]) -> list[dict[str, Any]]:
        out = []
        for i in ids:
            inc = await self.incident(i)
            if inc is not None:
                out.append(inc)
        return out
