"""On-call paging on a real Redis and a real local HTTP receiver: grouping and timing,
payload formats, HMAC signatures, retries, dead letters, restarts, silences, rate
limits and the SSRF guard."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_network
from typing import Any

import httpx
import pytest
import pytest_asyncio
from prometheus_client import REGISTRY

from detectors.policy.persistence import PersistenceConfig
from detectors.policy.silence import Matcher, SilenceSpec
from service.alerting.keys import EVENTS
from service.alerting.models import Alert
from service.alerting.silences import SilenceStore
from service.alerting.store import AlertStore
from service.api.app import create_app
from service.embedded import free_port
from service.paging.keys import GROUPS_DUE, ITEM_PREFIX, notify_group_key
from service.paging.notifier import Notifier
from service.paging.outbox import Outbox, RetryPolicy
from service.paging.payloads import SIGNATURE_HEADER, verify_signature
from service.paging.timing import GroupState, Timing, decide
from service.profiles.store import Store
from service.registry import FeatureDeclaration, ModelConfig
from service.runtime.redis_client import flush
from service.settings import Settings
from tests.conftest import wait_for
from tests.test_alerting_policy import BREACH, HEALTHY, apply, policy

LOCAL = [ip_network("127.0.0.0/8")]
FAST = {"group_wait_seconds": 0.2, "group_interval_seconds": 0.2, "repeat_interval_seconds": 3600}
SECRET = "s3cret-s3cret-s3cret"
ONE_WINDOW = PersistenceConfig(k=1, m=1, resolve_after=1)  # one breach fires, one healthy resolves
FEED = ModelConfig(persistence=ONE_WINDOW, routing={"team": "payments"},
                   features={f: FeatureDeclaration(type="numeric", source="feed") for f in ("x", "y")})
PLAIN = ModelConfig(persistence=ONE_WINDOW)


# --- a real HTTP receiver ---------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int
    at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Hook:
    """An HTTP server on 127.0.0.1 in a thread: records every POST and answers 200,
    or 500 to the first ``fail[path]`` requests, or always ``status[path]``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[Request] = []
        self.fail: dict[str, int] = {}
        self.status: dict[str, int] = {}
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with hook.lock:
                    seen = sum(1 for r in hook.requests if r.path == self.path)
                    code = hook.status.get(self.path) or (500 if seen < hook.fail.get(self.path, 0) else 200)
                    hook.requests.append(Request(self.path, dict(self.headers), body, code, time.time()))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def received(self, path: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.path == path]

    def delivered(self, path: str) -> list[Request]:
        return [r for r in self.received(path) if 200 <= r.status < 300]


# --- fixtures and helpers -------------------------------------------------------------------
@pytest.fixture
def cfg(redis_url: str) -> Settings:
    """Paging settings with short backoffs and leases (no Kafka needed)."""
    return Settings(redis_url=redis_url, notifier_group=f"ntf-{uuid.uuid4().hex[:8]}",
                    notifier_max_attempts=3, notifier_backoff_base_seconds=0.05,
                    notifier_backoff_max_seconds=0.2, notifier_request_timeout_seconds=2.0,
                    notifier_lease_seconds=1.0, receiver_allow_nets=LOCAL)


@pytest_asyncio.fixture
async def rstore(redis_url: str, redis_is_cluster: bool):
    s = Store(redis_url, redis_is_cluster)
    await flush(s.r)
    yield s
    await s.close()


@pytest.fixture
def hook():
    h = Hook()
    h.start()
    yield h
    h.stop()


def api(settings: Settings, store: Store) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                             base_url="http://t")


async def add_receiver(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    resp = await http.post("/v1/receivers", json={"name": body.get("kind", "r"), **FAST, **body})
    assert resp.status_code == 201, resp.json()
    return resp.json()


@contextlib.asynccontextmanager
async def notifying(settings: Settings, store: Store, **kw: Any):
    """A notifier task for the block; stopped gracefully at its end."""
    stop = asyncio.Event()
    task = asyncio.create_task(Notifier(settings, store, **kw).run(stop))
    try:
        yield task
    finally:
        stop.set()
        if not task.cancelled():
            await asyncio.wait_for(task, 15)


def counted(kind: str, outcome: str) -> float:
    return REGISTRY.get_sample_value("fleetwatch_notifications_total",
                                     {"receiver_kind": kind, "outcome": outcome}) or 0.0


def answered(hook: Hook, path: str, n: int):
    """Condition for wait_for: at least ``n`` requests to ``path`` were answered 2xx."""
    async def condition() -> bool:
        return len(hook.delivered(path)) >= n
    return condition


def events_handled(store: Store):
    """Condition for wait_for: the notifier handled every alert event (they are deleted)."""
    async def condition() -> bool:
        return await store.r.xlen(EVENTS) == 0
    return condition


async def settled(store: Store) -> bool:
    """Nothing left that could send: every event handled, no group due within a
    minute, no pending notification."""
    return (await store.r.xlen(EVENTS) == 0
            and not await store.r.zrangebyscore(GROUPS_DUE, "-inf", time.time() + 60)
            and (await Outbox(store.r).counts())["pending"] == 0)


async def incident_of(store: Store, model: str, feature: str) -> str:
    [alert] = [a for a in await AlertStore(store.r).alerts(model, 0, 100) if a.feature == feature]
    return alert.incident_id


# --- the flow, PagerDuty format ---------------------------------------------------------------
async def test_pagerduty_gets_one_trigger_an_acknowledge_and_a_resolve_through_failures(cfg, rstore, hook):
    hook.fail["/pd"] = 2  # the receiver answers 500 twice before it accepts
    retried = counted("pagerduty", "retried")
    p = policy(rstore)
    async with api(cfg, rstore) as http, notifying(cfg, rstore):
        await add_receiver(http, kind="pagerduty", url=hook.url("/pd"), routing_key="R" * 32,
                           matchers=[{"name": "team", "value": "pay.*", "regex": True}],
                           group_wait_seconds=1.0)
        # Two alerts of one incident (one upstream source) arrive within group_wait.
        await apply(p, "fraud", 0, {("x", "psi"): BREACH}, FEED)
        await wait_for(events_handled(rstore), timeout=15)
        assert await Outbox(rstore.r).list(None, 10) == []  # waiting for group_wait
        await apply(p, "fraud", 1, {("x", "psi"): BREACH, ("y", "psi"): BREACH}, FEED)
        incident = await incident_of(rstore, "fraud", "x")
        assert await incident_of(rstore, "fraud", "y") == incident

        await wait_for(answered(hook, "/pd", 1), timeout=15)
        [trigger] = hook.delivered("/pd")
        assert len(hook.received("/pd")) == 3  # 500, 500, then delivered
        assert counted("pagerduty", "retried") - retried == 2
        event = trigger.json
        assert (event["event_action"], event["dedup_key"], event["routing_key"]) == (
            "trigger", incident, "R" * 32)
        assert event["payload"]["severity"] == "critical" and event["payload"]["source"] == "fraud"
        assert sorted(a["feature"] for a in event["payload"]["custom_details"]["alerts"]) == ["x", "y"]

        [alert, _] = await AlertStore(rstore.r).alerts("fraud", 0, 10)
        assert (await http.post(f"/v1/alerts/{alert.id}/ack", json={"by": "ana"})).status_code == 200
        await wait_for(answered(hook, "/pd", 2), timeout=15)
        assert hook.delivered("/pd")[1].json == {"routing_key": "R" * 32, "event_action": "acknowledge",
                                                 "dedup_key": incident}

        await apply(p, "fraud", 2, {("x", "psi"): HEALTHY, ("y", "psi"): HEALTHY}, FEED)
        await wait_for(answered(hook, "/pd", 3), timeout=15)
        await wait_for(lambda: settled(rstore), timeout=15)
        events = [r.json for r in hook.delivered("/pd")]
        assert [(e["event_action"], e["dedup_key"]) for e in events] == [
            ("trigger", incident), ("acknowledge", incident), ("resolve", incident)]

        done = (await http.get("/v1/notifications", params={"state": "delivered"})).json()
        assert [(n["action"], n["attempts"]) for n in reversed(done)] == [
            ("trigger", 3), ("acknowledge", 1), ("resolve", 1)]
        assert all("routing_key" not in n["body"] for n in done)  # no credential stored


# --- the other formats and the signature -------------------------------------------------------
async def test_signed_webhook_slack_and_alertmanager_payloads(cfg, rstore, hook):
    p = policy(rstore)
    async with api(cfg, rstore) as http, notifying(cfg, rstore):
        await add_receiver(http, kind="webhook", url=hook.url("/hook"), secret=SECRET)
        await add_receiver(http, kind="slack", url=hook.url("/slack"))
        am = await add_receiver(http, kind="alertmanager", url=hook.url("/am"))
        await apply(p, "fraud", 0, {("x", "psi"): BREACH, ("y", "psi"): BREACH}, FEED)
        incident = await incident_of(rstore, "fraud", "x")
        for path in ("/hook", "/slack", "/am"):
            await wait_for(answered(hook, path, 1), timeout=15)

    [signed] = hook.delivered("/hook")
    header = signed.headers[SIGNATURE_HEADER]
    t = int(header.split(",")[0].removeprefix("t="))
    assert abs(t - signed.at) < 5
    assert verify_signature(SECRET, signed.body, header, now=time.time())
    tampered = signed.body.replace(b'"trigger"', b'"resolve"')
    assert tampered != signed.body and not verify_signature(SECRET, tampered, header, now=time.time())
    assert not verify_signature("another-secret-000", signed.body, header, now=time.time())
    assert not verify_signature(SECRET, signed.body, header, now=t + 301)  # replayed too late
    assert verify_signature(SECRET, signed.body, header, now=t + 299)
    assert not verify_signature(SECRET, signed.body, None, now=time.time())
    body = signed.json
    assert (body["action"], body["status"], body["incident"]["id"]) == ("trigger", "firing", incident)
    assert sorted(a["feature"] for a in body["alerts"]) == ["x", "y"]
    assert body["alerts"][0]["routing"] == {"team": "payments"}

    [slack] = hook.delivered("/slack")
    assert SIGNATURE_HEADER not in slack.headers
    assert slack.json["text"].startswith("[FIRING critical] upstream source feed failing: 2 of 2")
    assert [b["type"] for b in slack.json["blocks"]] == ["header", "section", "section", "context"]
    assert len(slack.json["blocks"][2]["fields"]) == 2

    [amb] = hook.delivered("/am")
    payload = amb.json
    assert (payload["version"], payload["status"], payload["receiver"]) == ("4", "firing", "alertmanager")
    assert payload["groupKey"] == f'{{}}/{{receiver="{am["id"]}"}}:{{incident_id="{incident}"}}'
    assert payload["commonLabels"]["incident_id"] == incident
    assert {a["labels"]["feature"] for a in payload["alerts"]} == {"x", "y"}
    assert all(a["status"] == "firing" and a["endsAt"] == "0001-01-01T00:00:00Z"
               and len(a["fingerprint"]) == 16 for a in payload["alerts"])


# --- retries exhausted, permanent failures ------------------------------------------------------
async def test_dead_letters_after_max_attempts_are_listed(cfg, rstore, hook):
    hook.status["/down"] = 503  # always
    hook.status["/bad"] = 400  # a permanent refusal: not retried
    dead = counted("webhook", "dead")
    async with api(cfg, rstore) as http, notifying(cfg, rstore):
        await add_receiver(http, kind="webhook", url=hook.url("/down"), secret=SECRET, name="down")
        await add_receiver(http, kind="webhook", url=hook.url("/bad"), secret=SECRET, name="bad")
        await apply(policy(rstore), "m", 0, {("x", "psi"): BREACH}, PLAIN)

        async def two_dead() -> bool:
            got = await http.get("/v1/notifications", params={"state": "dead"})
            return len(got.json()) == 2

        await wait_for(two_dead, timeout=15)
        listed = (await http.get("/v1/notifications", params={"state": "dead"})).json()
        by_error = {n["last_error"]: n for n in listed}
        assert by_error["HTTP 503"]["attempts"] == 3 and by_error["HTTP 400"]["attempts"] == 1
        assert len(hook.received("/down")) == 3 and len(hook.received("/bad")) == 1
        assert all(n["state"] == "dead" and n["action"] == "trigger" and n["due_at"] is None
                   for n in listed)
        assert counted("webhook", "dead") - dead == 2
        assert (await http.get("/v1/notifications", params={"state": "pending"})).json() == []
        first = (await http.get("/v1/notifications", params={"limit": 1})).json()
        second = (await http.get("/v1/notifications", params={"limit": 1, "offset": 1})).json()
        assert len(first) == len(second) == 1 and first[0]["id"] != second[0]["id"]
        assert {first[0]["id"], second[0]["id"]} == {n["id"] for n in listed}
        bad = await http.get("/v1/notifications", params={"state": "lost"})
        assert bad.status_code == 422 and bad.json()["field"] == "state"


# --- crash and restart ----------------------------------------------------------------------------
async def test_a_notifier_crash_loses_nothing_and_sends_nothing_twice(cfg, rstore):
    hook = Hook()  # not started yet: at first the receiver accepts connections and never answers
    hole = socket.socket()
    hole.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    hole.bind(("127.0.0.1", hook.port))
    hole.listen(64)
    patient = cfg.model_copy(update={"notifier_max_attempts": 1000, "notifier_request_timeout_seconds": 0.5})
    p = policy(rstore)
    outbox = Outbox(rstore.r)
    async with api(patient, rstore) as http:
        await add_receiver(http, kind="pagerduty", url=hook.url("/pd"), routing_key="K" * 32)

    async def leases() -> list[bytes | None]:
        return [await rstore.r.hget(ITEM_PREFIX + i.id, "lease") for i in await outbox.list("pending", 10)]

    try:
        first = asyncio.create_task(Notifier(patient, rstore).run(asyncio.Event()))
        await apply(p, "m", 0, {("a", "psi"): BREACH, ("b", "psi"): BREACH}, PLAIN)

        async def both_in_flight_again() -> bool:
            items = await outbox.list("pending", 10)
            held = await leases()
            return len(items) == 2 and all(i.attempts >= 1 for i in items) and all(held)

        await wait_for(both_in_flight_again, timeout=15)
        first.cancel()  # a crash in the middle of two deliveries
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(first, 15)
        assert all(await leases())  # still leased to the dead notifier

        # While no notifier runs: a new incident fires, and incident a resolves.
        await apply(p, "m", 1, {("a", "psi"): HEALTHY, ("b", "psi"): BREACH, ("c", "psi"): BREACH}, PLAIN)
        hole.close()
        hook.start()  # the receiver is back, on the same port
        async with notifying(patient, rstore):
            await wait_for(answered(hook, "/pd", 4), timeout=20)
            await wait_for(lambda: settled(rstore), timeout=20)
    finally:
        hole.close()
        hook.stop()

    a, b, c = [await incident_of(rstore, "m", f) for f in "abc"]
    sent = Counter((r.json["dedup_key"], r.json["event_action"]) for r in hook.delivered("/pd"))
    assert sent == Counter({(a, "trigger"): 1, (b, "trigger"): 1, (c, "trigger"): 1, (a, "resolve"): 1})
    ids = [r.headers["X-Fleetwatch-Delivery"] for r in hook.delivered("/pd")]
    assert len(ids) == len(set(ids)) == 4
    actions = [r.json["event_action"] for r in hook.delivered("/pd") if r.json["dedup_key"] == a]
    assert actions == ["trigger", "resolve"]  # a resolve never overtakes its trigger


async def test_a_hard_stop_ends_the_notifier_even_when_a_call_swallows_its_cancellation(cfg, rstore):
    notifier = Notifier(cfg, rstore)
    entered = asyncio.Event()
    next_due = notifier.outbox.next_due

    async def swallowing() -> float | None:  # a library call that eats the CancelledError
        entered.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        return await next_due()

    notifier.outbox.next_due = swallowing  # type: ignore[method-assign]
    task = asyncio.create_task(notifier.run(asyncio.Event()))
    await asyncio.wait_for(entered.wait(), 10)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=10)
    assert done == {task} and task.cancelled()


# --- silences ------------------------------------------------------------------------------------------
async def test_silenced_alerts_are_never_notified(cfg, rstore, hook):
    now = time.time()
    silences = SilenceStore(rstore.r)
    await silences.create(SilenceSpec(matchers=[Matcher(name="model", value="quiet")], ends_at=now + 3600,
                                      created_by="ana", comment="backfill"), now)
    active = await silences.active(now)
    p = policy(rstore)
    async with api(cfg, rstore) as http, notifying(cfg, rstore):
        await add_receiver(http, kind="webhook", url=hook.url("/hook"), secret=SECRET)
        await apply(p, "quiet", 0, {("q", "psi"): BREACH, ("s", "psi"): BREACH}, PLAIN, active, now)
        await apply(p, "loud", 0, {("q", "psi"): BREACH}, PLAIN, active, now)
        await wait_for(answered(hook, "/hook", 1), timeout=15)
        await wait_for(lambda: settled(rstore), timeout=15)

    [only] = hook.delivered("/hook")
    shared = await incident_of(rstore, "loud", "q")
    assert await incident_of(rstore, "quiet", "q") == shared  # one incident, a silenced alert in it
    assert only.json["incident"]["id"] == shared
    assert [a["model_id"] for a in only.json["alerts"]] == ["loud"]
    silent = await incident_of(rstore, "quiet", "s")
    assert await rstore.r.keys(notify_group_key("*", silent)) == []
    assert len(await Outbox(rstore.r).list(None, 100)) == 1


async def test_an_alert_silenced_after_it_fired_reads_silenced_and_is_not_paged(cfg, rstore, hook):
    now = time.time()
    p = policy(rstore)
    async with api(cfg, rstore) as http:
        rc = await add_receiver(http, kind="webhook", url=hook.url("/hook"), secret=SECRET,
                                group_wait_seconds=30)
        await apply(p, "late", 0, {("q", "psi"): BREACH}, PLAIN, (), now)
        [fired] = await AlertStore(rstore.r).alerts("late", 0, 10)
        assert fired.notify and fired.silenced_by == []
        notifier = Notifier(cfg, rstore)
        event = {"kind": "fired", "alert_id": fired.id, "incident_id": fired.incident_id}
        assert await notifier.handle_event(event, await notifier.receivers.all(), now) == 1  # group_wait

        resp = await http.post("/v1/silences", json={
            "matchers": [{"name": "model", "value": "late"}], "created_by": "ana", "comment": "known",
            "ends_at": datetime.fromtimestamp(now + 3600, UTC).isoformat()})
        sid = resp.json()["id"]
        # Every view says so at once, though the policy wrote the alert before the silence.
        views = [next(a for a in (await http.get("/v1/alerts")).json() if a["id"] == fired.id),
                 (await http.get(f"/v1/alerts/{fired.id}")).json(),
                 (await http.get(f"/v1/incidents/{fired.incident_id}")).json()["alerts"][0],
                 (await http.get("/v1/incidents")).json()[0]["alerts"][0]]
        assert [(v["silenced_by"], v["notify"]) for v in views] == [([sid], False)] * 4
        # The group's trigger is due, and nothing is sent.
        assert await notifier.flush(f"{rc['id']}:{fired.incident_id}", now + 60) == []
        assert await Outbox(rstore.r).list(None, 10) == []
        assert await notifier.handle_event(event, await notifier.receivers.all(), now + 61) == 0

        assert (await http.delete(f"/v1/silences/{sid}")).status_code == 200
        back = (await http.get(f"/v1/alerts/{fired.id}")).json()
        assert back["silenced_by"] == [] and back["notify"]  # an expired silence no longer mutes


# --- rate limit ------------------------------------------------------------------------------------------
async def test_rate_limit_defers_and_drops_nothing(cfg, rstore, hook):
    limited = counted("webhook", "rate_limited")
    async with api(cfg, rstore) as http, notifying(cfg, rstore, rate_window_seconds=1.0):
        await add_receiver(http, kind="webhook", url=hook.url("/hook"), secret=SECRET, max_per_minute=2)
        await apply(policy(rstore), "m", 0, {(f, "psi"): BREACH for f in ("f1", "f2", "f3", "f4")}, PLAIN)
        await wait_for(answered(hook, "/hook", 4), timeout=15)
        await wait_for(lambda: settled(rstore), timeout=15)
    times = sorted(r.at for r in hook.delivered("/hook"))
    assert times[2] - times[0] >= 0.8  # the third waited for the first's slot to free (1 s window)
    assert counted("webhook", "rate_limited") - limited >= 2
    incidents = Counter(r.json["incident"]["id"] for r in hook.delivered("/hook"))
    assert len(incidents) == 4 and set(incidents.values()) == {1}


# --- SSRF ------------------------------------------------------------------------------------------------
async def test_receiver_urls_into_private_networks_are_refused(cfg, rstore, hook):
    closed = cfg.model_copy(update={"receiver_allow_nets": []})
    async with api(closed, rstore) as http:
        for url in (hook.url("/hook"), f"http://localhost:{hook.port}/hook", "http://169.254.169.254/latest",
                    "http://10.0.0.1/hook", "http://[::1]:8080/hook", "http://0.0.0.0/hook",
                    "http://[2002:7f00:1::]/hook", "http://[2002:a9fe:a9fe::]/latest",
                    "http://[64:ff9b::a9fe:a9fe]/latest"):
            resp = await http.post("/v1/receivers", json={"name": "h", "kind": "webhook", "url": url,
                                                          "secret": SECRET})
            assert resp.status_code == 422 and resp.json()["field"] == "url", (url, resp.json())
            assert resp.json()["code"] == "unsafe_url"
        scheme = await http.post("/v1/receivers", json={"name": "h", "kind": "webhook",
                                                        "url": "file:///etc/passwd", "secret": SECRET})
        assert scheme.status_code == 422 and scheme.json()["field"] == "url"
        public = await http.post("/v1/receivers", json={
            "name": "h", "kind": "webhook", "url": "https://93.184.216.34/hook", "secret": SECRET})
        assert public.status_code == 201
        await http.delete(f"/v1/receivers/{public.json()['id']}")
    async with api(cfg, rstore) as http:  # allowed by FLEETWATCH_RECEIVER_ALLOW_NETS
        await add_receiver(http, kind="webhook", url=hook.url("/hook"), secret=SECRET)

    # Checked again at send time: a notifier without the allow-list refuses to send.
    async with notifying(closed, rstore):
        await apply(policy(rstore), "m", 0, {("x", "psi"): BREACH}, PLAIN)

        async def refused() -> bool:
            return len(await Outbox(rstore.r).list("dead", 10)) == 1

        await wait_for(refused, timeout=15)
    [item] = await Outbox(rstore.r).list("dead", 10)
    assert item.last_error.startswith("url refused: host 127.0.0.1 resolves to 127.0.0.1, a loopback")
    assert hook.received("/hook") == []


# --- receivers API ---------------------------------------------------------------------------------------
async def test_receiver_api_hides_credentials_and_names_bad_fields(cfg, rstore):
    async with api(cfg, rstore) as http:
        hook = await add_receiver(http, kind="webhook", url="http://127.0.0.1:9/h", secret=SECRET)
        pd = await add_receiver(http, kind="pagerduty", routing_key="PDKEY-0123456789", url="http://127.0.0.1:9/pd")
        slack = await add_receiver(http, kind="slack", url="http://127.0.0.1:9/services/T0/B0/XYZSECRET")
        assert (hook["has_secret"], pd["has_routing_key"], "secret" not in hook) == (True, True, True)
        listed = await http.get("/v1/receivers")
        for text in (listed.text, (await http.get(f"/v1/receivers/{pd['id']}")).text):
            assert SECRET not in text and "PDKEY" not in text and "XYZSECRET" not in text
        assert [r["id"] for r in listed.json()] == [slack["id"], pd["id"], hook["id"]]
        page = (await http.get("/v1/receivers", params={"limit": 2, "offset": 2})).json()
        assert [r["id"] for r in page] == [hook["id"]]

        assert (await http.delete(f"/v1/receivers/{pd['id']}")).status_code == 204
        gone = await http.get(f"/v1/receivers/{pd['id']}")
        assert gone.status_code == 404 and gone.json()["field"] == "receiver_id"
        assert (await http.delete(f"/v1/receivers/{pd['id']}")).status_code == 404

        base = {"name": "x", "url": "http://127.0.0.1:9/h"}
        for field, body in [
            ("routing_key", {**base, "kind": "pagerduty"}),
            ("secret", {**base, "kind": "webhook"}),
            ("secret", {**base, "kind": "slack", "secret": SECRET}),
            ("routing_key", {**base, "kind": "webhook", "secret": SECRET, "routing_key": "k"}),
            ("url", {"name": "x", "kind": "webhook", "secret": SECRET}),
            ("kind", {**base, "kind": "email"}),
            ("repeat_interval_seconds", {**base, "kind": "slack", "group_interval_seconds": 600,
                                         "repeat_interval_seconds": 60}),
            ("matchers.0.value", {**base, "kind": "slack",
                                  "matchers": [{"name": "team", "value": "(", "regex": True}]}),
            ("max_per_minute", {**base, "kind": "slack", "max_per_minute": 0}),
            ("colour", {**base, "kind": "slack", "colour": "red"}),
        ]:
            resp = await http.post("/v1/receivers", json=body)
            assert resp.status_code == 422 and resp.json()["field"] == field, (field, resp.json())


# --- pure parts ------------------------------------------------------------------------------------------
def alerts(*specs: str) -> list[Alert]:
    """Alerts with only what ``decide`` reads: ``"id:state"`` each."""
    return [Alert.model_construct(id=i, state=st) for i, st in (s.split(":") for s in specs)]


def test_decide_spaces_updates_and_retriggers_after_a_resolve():
    t = Timing(group_wait=10, group_interval=60, repeat_interval=600)
    sent = decide(GroupState(first_seen=0.0), alerts("a:firing"), t, 10).state
    two = alerts("a:firing", "b:firing")
    early = decide(sent, two, t, 30)
    assert (early.actions, early.next_at) == ((), 70)  # a new alert waits for group_interval
    update = decide(sent, two, t, 70)
    assert update.actions == ("update",) and update.state.firing == ("a", "b")
    resolved = decide(update.state, alerts("a:resolved", "b:resolved"), t, 200)
    assert resolved.actions == ("resolve",) and resolved.state.members == ("a", "b")
    again = decide(resolved.state, alerts("c:firing"), t, 230)
    assert (again.actions, again.next_at) == ((), 260)  # group_interval after the resolve
    assert decide(resolved.state, alerts("c:firing"), t, 260).actions == ("trigger",)


def test_backoff_comes_from_tenacity_and_grows_to_its_cap():
    policy_ = RetryPolicy(max_attempts=5, base_seconds=0.5, max_seconds=4.0)
    delays = [policy_.delay(n) for n in range(1, 7)]
    for n, d in enumerate(delays, start=1):
        exp = min(0.5 * 2 ** (n - 1), 4.0)
        assert exp <= d <= exp + 0.5, (n, d)
    assert [policy_.exhausted(n) for n in (4, 5)] == [False, True]
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0, base_seconds=1, max_seconds=1)
