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
from typing import Any, TypeVar

import orjson
from pydantic import ValidationError

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
    looks_key,
    model_alerts_key,
    quality_spans_key,
    series_key,
)
from service.alerting.lua import JOIN, PENDING_HORIZON_SECONDS, RECORD, SET_OPEN, SETTLE, UPSERT
from service.alerting.models import Alert, Incident, IncidentRecord
from service.alerting.silences import SilenceStore, muted_now
from service.profiles.keys import pending_key, status_key, window_index_key
from service.runtime.redis_client import Client
from service.stored import describe

log = logging.getLogger("fleetwatch.alerting")

EVENTS_MAXLEN = 100_000
#: Incident and data-quality spans ending this long (event time) before a new alert's are forgotten.
SPAN_MEMORY_SECONDS = 8 * 86_400
#: Least number of alert ids a filtered page reads from the time index at a time.
SCAN_BATCH = 200
T = TypeVar("T", Alert, Incident)


@dataclass(frozen=True)
class OpenAlert:
    """What the fleet overview reads of an alert not resolved."""

    model_id: str
    severity: str
    incident_id: str | None

    @classmethod
    def of(cls, alert: Alert) -> OpenAlert:
        return cls(alert.model_id, alert.severity, alert.incident_id or None)

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


@dataclass(frozen=True)
class LookState:
    """What a look at an open window reads (:meth:`AlertStore.look_state`)."""

    seq: int  # the model's policy sequence number now (the look writes at it, never past it)
    applied: bool  # the policy has applied the window: its close has decided
    behind: bool  # the policy has not applied every earlier window of the model yet
    series: dict[str, list[Any]]  # field -> the series' stored outcomes (fields with any)
    level: float | None  # FDR batch level of the model's last gated window


def series_field(feature: str, check: str) -> str:
    return f"{feature}\0{check}"


def effective_state(alert: Alert) -> str:
    """firing / acknowledged / resolved, with the user's actions applied."""
    if alert.state == "resolved" or alert.resolved_by:
        return "resolved"
    return "acknowledged" if alert.acked_by else "firing"


def read_alert(key: bytes | str, raw: dict[bytes, bytes]) -> Alert | None:
    """An alert from its hash (``raw``): the JSON body with the hash's own fields (the first
    write's ``created_at``, the incident, the user's actions) over it and the user's actions
    applied to its state; None when it has no body or does not parse (logged).

    Examples
    --------
    >>> body = ('{"id": "a1", "model_id": "fraud", "model_version": "3", "feature": "amount",'
    ...         ' "check": "psi", "state": "firing", "severity": "warning", "tier": 2,'
    ...         ' "group_key": "feature:amount", "incident_id": null, "window_start": 0,'
    ...         ' "window_end": 300, "fired_window_start": 300, "last_window_start": 300,'
    ...         ' "evidence_count": 2, "notify": true, "created_at": 700.0}')
    >>> a = read_alert("k", {b"body": body.encode(), b"created_at": b"600.0", b"seq": b"4",
    ...                      b"state": b"firing", b"incident_id": b"i1", b"acked_by": b"ana"})
    >>> a.state, a.created_at, a.incident_id, a.acked_by
    ('acknowledged', 600.0, 'i1', 'ana')
    >>> read_alert("k", {b"seq": b"4"}) is None
    True
    """
    if b"body" not in raw:
        return None
    fields = {k.decode(): v.decode() for k, v in raw.items()}
    body = orjson.loads(fields.pop("body"))
    body["created_at"] = float(fields.pop("created_at"))
    fields.pop("seq", None)
    fields.pop("state", None)
    body.update(fields)
    try:
        alert = Alert.model_validate(body)
    except ValidationError as exc:
        log.error("stored alert %r does not parse (%s); it is left out of every read",
                  key.decode() if isinstance(key, bytes) else key, describe(exc))
        return None
    return alert.model_copy(update={"state": effective_state(alert)})


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
        self._record = r.register_script(RECORD.replace("PENDING_HORIZON", str(PENDING_HORIZON_SECONDS)))
        self._settle = r.register_script(SETTLE)
        self._upsert = r.register_script(UPSERT)
        self._join = r.register_script(JOIN)
        self._set_open = r.register_script(SET_OPEN)

    # -- series --------------------------------------------------------------------
    async def record(self, model_id: str, window_start: int, member: str,
                     outcomes: dict[str, list[Any]]) -> Recorded:
        """Record one window's outcome per series and release it (see ``RECORD``)."""
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
    async def upsert(self, alert: Alert) -> int:
        """Write an alert (its body, :meth:`Alert.body`) unless the stored one is newer:
        1 created, 2 updated, 3 updated with a new state, 0 stale."""
        return int(await self._upsert(
            keys=[alert_key(alert.id), ALERTS, model_alerts_key(alert.model_id)],
            args=[alert.seq, alert.created_at, alert.state, json.dumps(alert.body()), alert.id]))

    async def set_incident(self, alert_id: str, incident_id: str) -> None:
        await self.r.hset(alert_key(alert_id), "incident_id", incident_id)

    async def alerts_by_id(self, ids: list[str]) -> list[Alert]:
        """The stored alerts of ``ids`` that exist (:func:`read_alert`), silenced as of now."""
        async with self.r.pipeline(transaction=False) as p:
            for i in ids:
                p.hgetall(alert_key(i))
            raws = await p.execute()
        out = [a for a in (read_alert(alert_key(i), raw) for i, raw in zip(ids, raws, strict=True))
               if a is not None]
        if not out:
            return out
        now = time.time()
        active = await self.silences.active(now)
        return [muted_now(a, active, now) for a in out]

    async def alert(self, alert_id: str) -> Alert | None:
        got = await self.alerts_by_id([alert_id])
        return got[0] if got else None

    async def alerts(self, model_id: str | None, since: float, limit: int, offset: int = 0,
                     keep: Callable[[Alert], bool] | None = None) -> list[Alert]:
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
                    load: Callable[[list[str]], Awaitable[list[T]]],
                    keep: Callable[[T], bool] | None) -> list[T]:
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
        page: list[T] = []
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

    # -- looks at open windows (service.alerting.policy.AlertPolicy.look) -------------
    async def look_state(self, model_id: str, member: str, start: int, prior_end: int,
                         fields: list[str]) -> LookState:
        """What a look at the open window ``member`` (starting at ``start``) needs, in one
        round trip: the model's policy sequence number; whether the policy has applied the
        window (it is in the model's index and no longer pending: its close has decided);
        whether it is behind, i.e. has not yet applied every earlier window of the model
        (one is pending, or one of another version at the same start, or the index does not
        reach ``prior_end``, the end of the latest earlier window the aggregator held); the
        stored outcomes of the series ``fields``;
        the FDR level of the model's last gated window (None: none gated yet, or forgotten)."""
        index = window_index_key(model_id)
        async with self.r.pipeline(transaction=False) as p:
            p.hget(alerting_key(model_id), "seq")
            p.zscore(index, member)
            p.zscore(pending_key(model_id), member)
            p.zrangebyscore(pending_key(model_id), "-inf", start, start=0, num=2)
            p.zrevrange(index, 0, 0, withscores=True)
            p.hmget(series_key(model_id), fields or ["-"])
            p.hget(status_key(model_id), "last_fdr_window")
            seq, stored, pending, earlier, latest, series, last = await p.execute()
        gate = None if last is None else await self.gate(model_id, last.decode())
        level = gate.get("level") if isinstance(gate, dict) else None
        reached = int(latest[0][1]) + int(latest[0][0].split(b":", 1)[0]) if latest else 0
        # pending: a window of the model at or before this one's start but this one (another
        # version's at the same start included)
        behind = any(m.decode() != member for m in earlier) or reached < prior_end
        return LookState(int(seq or 0), stored is not None and pending is None, behind,
                         {f: json.loads(raw)["o"] for f, raw in zip(fields, series[:len(fields)], strict=True)
                          if raw},
                         float(level) if isinstance(level, (int, float)) and level > 0 else None)

    async def register_look(self, model_id: str, alert_id: str, member: str, start: int, field: str,
                            outcome: list[Any]) -> None:
        """A look is about to fire ``alert_id`` in the open window ``member`` (starting at
        ``start``), a breach of the series ``field`` (``outcome``, as a window's is stored):
        the window's close records ``outcome`` if it cannot decide the series itself, and its
        release checks that the fold holds the alert (:meth:`looks`)."""
        await self.r.hset(looks_key(model_id), alert_id, json.dumps([member, start, field, outcome]))

    async def set_fired_at(self, alert_id: str, at: float) -> None:
        """The event time at which the alert's evidence sufficed, when a look saw it (set once:
        it stays whatever rewrites the alert's body)."""
        await self.r.hsetnx(alert_key(alert_id), "fired_at", repr(float(at)))

    async def clear_fired_at(self, alert_id: str) -> None:
        await self.r.hdel(alert_key(alert_id), "fired_at")

    async def looks(self, model_id: str) -> dict[str, tuple[str, int, str, list[Any]]]:
        """Alerts fired by looks at the model's windows not yet released: id -> (member,
        start, series field, the look's outcome)."""
        out = {}
        for k, v in (await self.r.hgetall(looks_key(model_id))).items():
            member, start, field, outcome = json.loads(v)
            out[k.decode()] = (member, int(start), field, outcome)
        return out

    async def forget_looks(self, model_id: str, alert_ids: list[str]) -> None:
        if alert_ids:
            await self.r.hdel(looks_key(model_id), *alert_ids)

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

    async def set_open(self, alert: Alert, is_open: bool) -> None:
        """Mark ``alert`` (as stored, with its incident) open or not, in ``{fw}:open`` and the
        overview's ``{fw}:open:alerts`` at once; an alert a user resolved stays closed."""
        await self._set_open(keys=[OPEN, OPEN_INDEX, alert_key(alert.id)],
                             args=[alert.id, int(is_open), OpenAlert.of(alert).to_json()])

    async def resolve(self, alert: Alert, fields: dict[str, str]) -> None:
        """Record a user's resolution (``fields``) and close the alert, in one step."""
        args: list[Any] = [alert.id, 0, b""]
        for k, v in fields.items():
            args += [k, v]
        await self._set_open(keys=[OPEN, OPEN_INDEX, alert_key(alert.id)], args=args)

    async def open_alerts(self) -> list[Alert]:
        """Every alert not resolved (firing or acknowledged)."""
        ids = sorted(m.decode() for m in await self.r.smembers(OPEN))
        return [a for a in await self.alerts_by_id(ids) if a.open()]

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
            if not alert.open():
                await self.resolve(alert, {})
            else:
                await self.set_open(alert, True)
                out[alert.id] = OpenAlert.of(alert)
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
                   incident: IncidentRecord, joined: str | None = None) -> str:
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
            args=[alert_id, incident.id, json.dumps(incident.model_dump(mode="json")), incident.created_at,
                  int(span[0]), int(span[1]), int(gap), int(span[0]) - SPAN_MEMORY_SECONDS,
                  joined or "", SPAN_MEMORY_SECONDS, incident_key("")])
        return raw.decode()

    async def incident(self, incident_id: str) -> Incident | None:
        """The incident with its alerts (:meth:`Incident.of`); None when unknown or when its
        stored record does not parse (logged)."""
        raw = await self.r.get(incident_key(incident_id))
        if raw is None:
            return None
        try:
            record = IncidentRecord.model_validate_json(raw)
        except ValidationError as exc:
            log.error("stored incident %r does not parse (%s); it is left out of every read",
                      incident_id, describe(exc))
            return None
        ids = sorted(m.decode() for m in await self.r.smembers(f"{incident_key(incident_id)}:alerts"))
        return Incident.of(record, await self.alerts_by_id(ids))

    async def incidents(self, since: float, limit: int, offset: int = 0,
                        keep: Callable[[Incident], bool] | None = None) -> list[Incident]:
        """Incidents opened at or after ``since``, newest first, with their alerts; ``keep``
        selects before ``limit`` and ``offset`` page (as in :meth:`alerts`)."""
        return await self._page(INCIDENTS, since, limit, offset, self._incidents_by_id, keep)

    async def _incidents_by_id(self, ids: list[str]) -> list[Incident]:
        out = []
        for i in ids:
            inc = await self.incident(i)
            if inc is not None:
                out.append(inc)
        return out
