"""Receiver kinds as plug-ins: the registry, each kind's retry rule, and the Opsgenie
(Alert API v2) and Microsoft Teams (Workflows webhook, Adaptive Card) formats against
their documented shapes and limits, unit and through the notifier to a real HTTP
receiver on a real Redis."""

from __future__ import annotations

import json
import typing

import pytest
from pydantic import ValidationError

from service.api.receivers import ReceiverView
from service.paging.kinds import KINDS, RECEIVER_KINDS, ReceiverKind, kind_of, render
from service.paging.kinds.opsgenie import OPSGENIE_ALERTS_URL
from service.paging.kinds.teams import CARD_CONTENT_TYPE, CARD_SCHEMA
from service.paging.outbox import OutboxItem
from service.paging.payloads import example_notice
from service.paging.receiver_config import Receiver, ReceiverSpec
from tests.conftest import wait_for
from tests.test_alerting_policy import BREACH, HEALTHY, apply, policy
from tests.test_paging_notifier import FEED, add_receiver, api, cfg, hook, incident_of, notifying, rstore  # noqa: F401

LONG = "x" * 400


def long_notice(action: str = "trigger"):
    """The example notice with a title, alert ids and checks far beyond every limit."""
    n = example_notice(action, url="https://fw.example.com/ui/incidents/inc1")
    alerts = tuple(a.model_copy(update={"check": f"{a.check}{LONG}"}) for a in n.alerts)
    incident = n.incident.model_copy(update={"title": LONG})
    return type(n)(n.action, n.receiver_id, n.receiver_name, incident, alerts, n.sent_at, n.url)


def item(action: str, body: dict, incident: str = "inc1") -> OutboxItem:
    return OutboxItem("n1", "r1", "opsgenie", incident, action, json.dumps(body), "pending", 0, 0.0, 0.0,
                      "", None)


# --- the registry -----------------------------------------------------------------------------
def test_every_kind_is_registered_once_and_is_the_api_literal():
    assert RECEIVER_KINDS == ("webhook", "slack", "pagerduty", "alertmanager", "opsgenie", "teams")
    assert set(typing.get_args(ReceiverKind)) == set(KINDS)
    view_kinds = ReceiverView.model_json_schema()["properties"]["kind"]["enum"]
    assert view_kinds == list(RECEIVER_KINDS)
    for name, k in KINDS.items():
        assert k.name == name and kind_of(name) is k
        assert set(k.needs) <= {"secret", "routing_key", "api_key"}


def test_retry_rules_differ_by_kind():
    """webhook and alertmanager retry 408, 425, 429 and 5xx; PagerDuty, Slack, Opsgenie and
    Teams document 429 and 5xx only; no kind retries another 4xx."""
    answers = (400, 401, 404, 408, 410, 425, 429, 500, 502, 503)
    retried = {name: [s for s in answers if k.retryable(s)] for name, k in KINDS.items()}
    generic = [408, 425, 429, 500, 502, 503]
    documented = [429, 500, 502, 503]
    assert retried == {"webhook": generic, "alertmanager": generic, "pagerduty": documented,
                       "slack": documented, "opsgenie": documented, "teams": documented}


@pytest.mark.parametrize("body, field", [
    ({"kind": "opsgenie"}, "api_key"),
    ({"kind": "slack", "url": "https://hooks.slack.com/services/T/B/X", "api_key": "k"}, "api_key"),
    ({"kind": "teams"}, "url"),
    ({"kind": "teams", "url": "https://example.com/workflows/1?sig=abc", "secret": "s" * 16}, "secret"),
    ({"kind": "opsgenie", "api_key": "k", "routing_key": "r"}, "routing_key"),
])
def test_each_kind_validates_its_own_credentials(body, field):
    with pytest.raises(ValidationError) as err:
        ReceiverSpec(name="r", **body)
    assert [e["loc"][0] for e in err.value.errors()] == [field]


def test_opsgenie_defaults_to_the_alert_api():
    spec = ReceiverSpec(name="ops", kind="opsgenie", api_key="0123-abcd")
    assert spec.url == OPSGENIE_ALERTS_URL == "https://api.opsgenie.com/v2/alerts"


# --- Opsgenie: Alert API v2 ---------------------------------------------------------------------
def test_opsgenie_create_fits_the_documented_fields_and_limits():
    """Create Alert: ``message`` (required) at most 130 characters, ``alias`` 512,
    ``description`` 15,000, ``entity`` 512, ``source`` 100, at most 20 ``tags`` of 50,
    ``details`` a map of strings, ``priority`` one of P1..P5."""
    for notice in (example_notice(), long_notice()):
        body = render("opsgenie", notice)
        assert set(body) <= {"message", "alias", "description", "responders", "visibleTo", "actions",
                             "tags", "details", "entity", "source", "priority", "user", "note"}
        assert 0 < len(body["message"]) <= 130 and body["alias"] == "inc1"
        assert len(body["description"]) <= 15_000 and len(body["entity"]) <= 512
        assert len(body["source"]) <= 100 and body["priority"] in ("P1", "P2", "P3", "P4", "P5")
        assert len(body["tags"]) <= 20 and all(0 < len(t) <= 50 for t in body["tags"])
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in body["details"].items())
    body = render("opsgenie", example_notice(url="https://fw.example.com/ui/incidents/inc1"))
    assert body["message"] == "[critical] upstream source payments_db failing"
    assert body["priority"] == "P1" and body["details"]["url"] == "https://fw.example.com/ui/incidents/inc1"
    assert render("opsgenie", example_notice("repeat"))["alias"] == "inc1"  # the same Opsgenie alert


def test_opsgenie_acknowledge_and_close_address_the_alert_by_alias():
    r = Receiver(id="r1", created_at=0, name="ops", kind="opsgenie", api_key="GK-123")
    k = kind_of("opsgenie")
    create = k.request(r, item("trigger", render("opsgenie", example_notice())), 0.0)
    assert create.url == "https://api.opsgenie.com/v2/alerts"
    assert create.headers["Authorization"] == "GenieKey GK-123" and b"GK-123" not in create.content
    ack = k.request(r, item("acknowledge", render("opsgenie", example_notice("acknowledge")), "inc/1"), 0.0)
    assert ack.url == "https://api.opsgenie.com/v2/alerts/inc%2F1/acknowledge?identifierType=alias"
    close = k.request(r, item("resolve", render("opsgenie", example_notice("resolve"))), 0.0)
    assert close.url == "https://api.opsgenie.com/v2/alerts/inc1/close?identifierType=alias"
    assert set(json.loads(close.content)) <= {"user", "source", "note"}
    eu = r.model_copy(update={"url": "https://api.eu.opsgenie.com/v2/alerts"})
    assert k.request(eu, item("resolve", {}), 0.0).url.startswith("https://api.eu.opsgenie.com/v2/alerts/inc1/")


# --- Microsoft Teams: Workflows webhook with an Adaptive Card -------------------------------------
def _elements(card: dict) -> list[dict]:
    return [*card["body"], *card.get("actions", [])]


def test_teams_message_is_one_adaptive_card_attachment():
    """A Workflows webhook takes a ``message`` whose ``attachments`` hold Adaptive Cards:
    ``contentType`` application/vnd.microsoft.card.adaptive, ``content`` an AdaptiveCard
    with ``$schema``, ``version`` and ``body`` of TextBlock (``text``), FactSet (``facts``
    of ``title`` / ``value`` strings) and ``Action.OpenUrl`` (``title``, ``url``)."""
    for notice in (example_notice(url="https://fw.example.com/ui/incidents/inc1"), long_notice("resolve")):
        body = render("teams", notice)
        assert body["type"] == "message" and len(body["attachments"]) == 1
        [attachment] = body["attachments"]
        assert attachment["contentType"] == CARD_CONTENT_TYPE == "application/vnd.microsoft.card.adaptive"
        card = attachment["content"]
        assert (card["type"], card["$schema"], card["version"]) == ("AdaptiveCard", CARD_SCHEMA, "1.4")
        for e in _elements(card):
            assert e["type"] in ("TextBlock", "FactSet", "Action.OpenUrl")
            if e["type"] == "TextBlock":
                assert isinstance(e["text"], str) and e["text"]
            elif e["type"] == "FactSet":
                assert e["facts"] and all(set(f) == {"title", "value"} and all(isinstance(v, str)
                                                                             for v in f.values())
                                          for f in e["facts"])
            else:
                assert e["url"] == "https://fw.example.com/ui/incidents/inc1" and e["title"]
    assert render("teams", long_notice("resolve"))["attachments"][0]["content"]["body"][0]["text"].startswith(
        "RESOLVED: ")
    assert "actions" not in render("teams", example_notice())["attachments"][0]["content"]  # no public URL


# --- through the notifier, to a real HTTP receiver -------------------------------------------------
def _posted(server, prefix: str) -> list:
    with server.lock:
        return [r for r in server.requests if r.path.startswith(prefix) and 200 <= r.status < 300]


async def test_opsgenie_and_teams_receivers_page_an_incident_end_to_end(cfg, rstore, hook):  # noqa: F811
    p = policy(rstore)
    async with api(cfg, rstore) as http, notifying(cfg, rstore):
        og = await add_receiver(http, kind="opsgenie", url=hook.url("/og/v2/alerts"), api_key="GK-0123456789")
        teams = await add_receiver(http, kind="teams", url=hook.url("/teams/workflows/1?sig=WFSECRET"))
        assert og["has_api_key"] and "GK-0123456789" not in json.dumps(og)
        assert teams["url"] == f"http://127.0.0.1:{hook.port}/…"  # the workflow URL is the credential

        await apply(p, "fraud", 0, {("x", "psi"): BREACH}, FEED)
        incident = await incident_of(rstore, "fraud", "x")

        async def sent(prefix: str, n: int) -> bool:
            return len(_posted(hook, prefix)) >= n

        await wait_for(lambda: sent("/og/", 1), timeout=15)
        await wait_for(lambda: sent("/teams/", 1), timeout=15)
        [create] = _posted(hook, "/og/")
        assert create.path == "/og/v2/alerts" and create.headers["Authorization"] == "GenieKey GK-0123456789"
        assert create.json["alias"] == incident and create.json["priority"] == "P1"
        [message] = _posted(hook, "/teams/")
        assert message.path == "/teams/workflows/1?sig=WFSECRET"
        assert message.json["attachments"][0]["content"]["type"] == "AdaptiveCard"

        await apply(p, "fraud", 1, {("x", "psi"): HEALTHY}, FEED)
        await wait_for(lambda: sent("/og/", 2), timeout=15)
        close = _posted(hook, "/og/")[1]
        assert close.path == f"/og/v2/alerts/{incident}/close?identifierType=alias"
        assert close.headers["Authorization"] == "GenieKey GK-0123456789"
        stored = (await http.get("/v1/notifications", params={"state": "delivered"})).json()
        assert {n["receiver_kind"] for n in stored} == {"opsgenie", "teams"}
        assert all("GK-0123456789" not in json.dumps(n["body"]) for n in stored)
