"""The notifier role: alert lifecycle events -> grouped, timed, durable notifications.

Three loops share one Redis:

1. **Consume** ``{fw}:alert-events`` (``service.alerting.store.EVENTS``) with a
   consumer group, as the detector consumes windows: entries another notifier
   read but did not acknowledge within the lease are reclaimed (XAUTOCLAIM),
   new ones read (XREADGROUP), and each is acknowledged and deleted once
   handled. An event *touches* the group of (receiver, incident) of every
   receiver whose matchers the alert satisfies (only alerts with
   ``notify: true``: silenced and inhibited alerts never page), or that
   already notified the alert: the group's state gets a new version and a
   flush time (group_wait after its first alert, group_interval after its last
   notification, at once for an acknowledgement).
2. **Flush** the groups whose time has come: read the incident's alerts,
   decide what to send (:func:`decide`: Alertmanager's group_wait /
   group_interval / repeat_interval, one trigger per incident, a resolve when
   all its alerts resolved, acknowledgements forwarded), render the payloads
   (``service.paging.payloads``) and commit the new state *and* the notifications to
   the outbox in one compare-and-set (``service.paging.outbox``): two notifiers
   flushing one group commit once, and a restart never sends a decision twice.
3. **Deliver** what the outbox has due, under a lease: the SSRF guard again
   (``service.paging.ssrf``), the receiver's rate limit (deferred, not dropped), an
   HTTP POST with httpx (signed for webhook receivers), then delivered,
   retried later (tenacity's backoff, stored as the due time) or dead-lettered
   (:class:`service.paging.courier.Courier`, one attempt).

Delivery is at least once: a notifier that dies after a receiver answered
but before it recorded the answer has the item sent again by the next one.
Every request carries ``X-Fleetwatch-Delivery: <notification id>`` so a
receiver can drop such a duplicate; PagerDuty deduplicates by ``dedup_key``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import timedelta

import httpx
from redis.exceptions import ResponseError

from service import metrics
from service.alerting.keys import EVENTS
from service.alerting.store import AlertStore
from service.paging.courier import Courier
from service.paging.keys import GROUPS_DUE, notify_group_key
from service.paging.kinds import render
from service.paging.lua import FORGET_GROUP, TOUCH_GROUP
from service.paging.outbox import Guard, NewItem, Outbox, OutboxItem
from service.paging.payloads import (
    Notice,
    encode,
    incident_url,
)
from service.paging.receiver_config import Receiver
from service.paging.receiver_store import ReceiverStore
from service.paging.timing import GroupState, Timing, decide
from service.profiles.store import Store
from service.runtime.outage import REDIS_DOWN, RedisOutage
from service.settings import Settings

log = logging.getLogger("fleetwatch.notifier")

RESOLVED_RETENTION = timedelta(days=7)
EVENTS_PER_READ = 100
GROUPS_PER_FLUSH = 100
IDLE_POLL_SECONDS = 1.0
FLUSH_ERROR_DELAY_SECONDS = 60.0
USER_AGENT = "fleetwatch-notifier/0.1"


class Notifier:
    """One notifier replica.

    Parameters
    ----------
    settings : Settings
        ``notifier_*`` and ``receiver_allow_nets``.
    store : Store
    rate_window_seconds : float, default 60
        The window of a receiver's ``max_per_minute`` (tests shorten it).
    """

    def __init__(self, settings: Settings, store: Store, rate_window_seconds: float = 60.0) -> None:
        self.settings = settings
        self.r = store.r
        self.alerts = AlertStore(store.r, role="notifier")
        self.receivers = ReceiverStore(store.r, role="notifier")
        self.outbox = Outbox(store.r)
        self.courier = Courier(settings, self.receivers, self.outbox, rate_window_seconds)
        self.lease = settings.notifier_lease_seconds
        if self.lease <= settings.notifier_request_timeout_seconds:
            log.warning("notifier_lease_seconds (%s) should exceed notifier_request_timeout_seconds (%s): "
                        "a slow delivery may be sent twice", self.lease,
                        settings.notifier_request_timeout_seconds)
        self.consumer = f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self._touch = store.r.register_script(TOUCH_GROUP)
        self._forget = store.r.register_script(FORGET_GROUP)
        self._groups_wake = asyncio.Event()
        self._outbox_wake = asyncio.Event()
        self._claims = 0
        # While Redis cannot serve, each loop waits and tries again; claims and unacknowledged
        # events wait for their leases (docs/paging.md).
        self.outage = RedisOutage(settings, "notifier")

    # -- the role -------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Consume, flush and deliver until ``stop`` is set; in-flight deliveries finish."""
        await self.outage.call(self._ensure_group, "create event group")
        halt = asyncio.Event()
        timeout = httpx.Timeout(self.settings.notifier_request_timeout_seconds)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False,
                                     headers={"User-Agent": USER_AGENT}) as http:
            self.courier.http = http
            loops = [asyncio.create_task(f(halt)) for f in (self._consume, self._flush_loop,
                                                             self._deliver_loop)]
            stopped = asyncio.create_task(stop.wait())
            try:
                await asyncio.wait([*loops, stopped], return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:  # a hard stop: leases and unacknowledged events
                halt.set()                  # are taken over later, by this or another replica;
                for t in loops:             # halt first, so a loop whose cancellation a library
                    t.cancel()              # call swallowed still ends at its next check
                await asyncio.gather(*loops, return_exceptions=True)
                raise
            finally:
                halt.set()
                stopped.cancel()
            results = await asyncio.gather(*loops, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                raise result

    async def _ensure_group(self) -> None:
        try:
            await self.r.xgroup_create(EVENTS, self.settings.notifier_group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    @staticmethod
    async def _pause(halt: asyncio.Event, wake: asyncio.Event, seconds: float) -> None:
        """Wait up to ``seconds`` for ``wake`` (or ``halt``), then clear ``wake``."""
        waiters = [asyncio.create_task(halt.wait()), asyncio.create_task(wake.wait())]
        try:
            await asyncio.wait(waiters, timeout=max(0.0, seconds), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
        wake.clear()

    # -- 1. events ------------------------------------------------------------------
    async def _consume(self, halt: asyncio.Event) -> None:
        group = self.settings.notifier_group
        while not halt.is_set():
            try:
                events = await self._read(group, EVENTS_PER_READ, 500)
                self.outage.recovered()
                receivers = await self.receivers.all() if events else []
                done = []
                for event_id, fields in events:
                    try:
                        await self.handle_event(fields, receivers, time.time())
                    except REDIS_DOWN:
                        raise
                    except Exception:
                        log.exception("alert event not handled event=%s", fields)
                    done.append(event_id)
                if done:
                    async with self.r.pipeline(transaction=True) as p:
                        p.xack(EVENTS, group, *done)
                        p.xdel(EVENTS, *done)
                        await p.execute()
            except REDIS_DOWN as exc:
                await self.outage.pause(exc, "alert events", halt)

    async def _read(self, group: str, count: int, block_ms: int) -> list[tuple[bytes, dict[str, str]]]:
        """Events another notifier left unacknowledged for a lease, then new ones."""
        reclaimed = await self.r.xautoclaim(EVENTS, group, self.consumer, int(self.lease * 1000), "0-0",
                                            count=count)
        out = list(reclaimed[1])
        if len(out) < count:
            resp = await self.r.xreadgroup(group, self.consumer, {EVENTS: ">"}, count=count - len(out),
                                           block=block_ms)
            for _stream, entries in resp or []:
                out += entries
        return [(eid, {k.decode(): v.decode() for k, v in fields.items()}) for eid, fields in out if fields]

    async def handle_event(self, fields: Mapping[str, str], receivers: Sequence[Receiver],
                           now: float) -> int:
        """Touch the groups an alert event concerns; how many."""
        alert = await self.alerts.alert(fields.get("alert_id", ""))
        if alert is None:
            return 0
        incident_id = fields.get("incident_id") or alert.incident_id
        if not incident_id:
            return 0
        touched = 0
        for rc in receivers:
            key = notify_group_key(rc.id, incident_id)
            if (alert.notify and rc.matches(alert)) or await self.r.exists(key):
                await self._touch(keys=[key, GROUPS_DUE],
                                  args=[repr(now), repr(rc.group_wait_seconds),
                                        repr(rc.group_interval_seconds), f"{rc.id}:{incident_id}",
                                        fields.get("kind", "")])
                touched += 1
        if touched:
            self._groups_wake.set()
        return touched

    # -- 2. groups ------------------------------------------------------------------
    async def _flush_loop(self, halt: asyncio.Event) -> None:
        while not halt.is_set():
            try:
                now = time.time()
                due = await self.r.zrangebyscore(GROUPS_DUE, "-inf", now, start=0, num=GROUPS_PER_FLUSH)
                self.outage.recovered()
                for member in due:
                    try:
                        await self.flush(member.decode(), time.time())
                    except REDIS_DOWN:
                        raise
                    except Exception:
                        log.exception("group flush failed group=%s; retried in %.0f s", member,
                                      FLUSH_ERROR_DELAY_SECONDS)
                        await self.r.zadd(GROUPS_DUE, {member: time.time() + FLUSH_ERROR_DELAY_SECONDS},
                                          xx=True)
                if len(due) == GROUPS_PER_FLUSH:
                    continue
                first = await self.r.zrange(GROUPS_DUE, 0, 0, withscores=True)
                wait = min(IDLE_POLL_SECONDS, first[0][1] - time.time()) if first else IDLE_POLL_SECONDS
                await self._pause(halt, self._groups_wake, wait)
            except REDIS_DOWN as exc:
                await self.outage.pause(exc, "notification groups", halt)

    async def flush(self, member: str, now: float) -> list[str]:
        """Decide and commit one group's notifications; the actions enqueued ([] also
        when another notifier committed first: the group is flushed again)."""
        receiver_id, incident_id = member.split(":", 1)
        key = notify_group_key(receiver_id, incident_id)
        raw = await self.r.hgetall(key)
        if not raw:
            await self._forget(keys=[key, GROUPS_DUE], args=[member])
            return []
        version = raw[b"v"].decode()
        state = GroupState.from_redis(raw)
        receiver = await self.receivers.get(receiver_id)
        incident = await self.alerts.incident(incident_id) if receiver is not None else None
        if receiver is None or incident is None:  # receiver deleted (or incident gone)
            await self.outbox.commit(Guard(key, version, None, GROUPS_DUE, member, None), [])
            return []
        view = [a for a in incident.alerts
                if a.id in state.members or (a.notify and receiver.matches(a))]
        decision = decide(state, view, Timing.of(receiver), now)
        meta = incident.record()
        items = []
        for action in decision.actions:
            body = render(receiver.kind, Notice(action, receiver.id, receiver.name, meta, view, now,
                                                incident_url(self.settings.public_url, incident_id)))
            if body is not None:
                items.append(NewItem(uuid.uuid4().hex, receiver.id, receiver.kind, incident_id, action,
                                     encode(body).decode(), now, now))
        ended = decision.state.sent == "none" and decision.next_at is None
        resolved = decision.state.sent == "resolved"
        guard = Guard(key, version, None if ended else decision.state.to_redis(), GROUPS_DUE, member,
                      decision.next_at,
                      int(RESOLVED_RETENTION.total_seconds()) if resolved else 0)
        if not await self.outbox.commit(guard, items):
            return []
        for item in items:
            log.info("notification queued receiver=%s kind=%s incident=%s action=%s id=%s",
                     receiver.id, receiver.kind, incident_id, item.action, item.id)
        if items:
            self._outbox_wake.set()
        return [i.action for i in items]

    # -- 3. delivery ----------------------------------------------------------------
    async def _deliver_loop(self, halt: asyncio.Event) -> None:
        """Claim due items while fewer than ``notifier_max_in_flight`` deliveries run, each in its
        own task (a slow receiver holds back nobody else); on a graceful stop the
        running deliveries finish, on a hard one their leases run out."""
        running: set[asyncio.Task[None]] = set()

        def done(task: asyncio.Task[None]) -> None:
            running.discard(task)
            self._outbox_wake.set()  # a slot is free, and the item's queue may have a next

        try:
            while not halt.is_set():
                try:
                    free = self.settings.notifier_max_in_flight - len(running)
                    items: list[OutboxItem] = []
                    if free > 0:
                        self._claims += 1
                        token = f"{self.consumer}-{self._claims}"
                        items = await self.outbox.claim(time.time(), self.lease, free, token)
                        self.outage.recovered()
                        for item in items:
                            task = asyncio.create_task(self._deliver_logged(item, token))
                            running.add(task)
                            task.add_done_callback(done)
                    for state, n in (await self.outbox.counts()).items():
                        metrics.OUTBOX_ITEMS.labels(state=state).set(n)
                    if items and len(items) == free:
                        continue
                    due = None if free <= 0 else await self.outbox.next_due()  # full: wait for one
                    wait = IDLE_POLL_SECONDS if due is None else min(IDLE_POLL_SECONDS, due - time.time())
                    await self._pause(halt, self._outbox_wake, wait)
                except REDIS_DOWN as exc:
                    await self.outage.pause(exc, "outbox", halt)
        except asyncio.CancelledError:
            for task in running:
                task.cancel()
            raise
        finally:
            await asyncio.gather(*running, return_exceptions=True)

    async def _deliver_logged(self, item: OutboxItem, token: str) -> None:
        try:
            await self.courier.deliver(item, token)
        except Exception:  # its lease ends and it is tried again
            log.exception("delivery failed id=%s receiver=%s", item.id, item.receiver_id)
