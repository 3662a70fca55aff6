"""Alert, incident and model-registration endpoints on a real Redis."""

from __future__ import annotations

import httpx

from service.alerting.store import AlertStore
from service.api.app import create_app
from tests.test_alerting_policy import BREACH, HEALTHY, apply, policy


def client(settings, store) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                             base_url="http://t")


async def test_ack_then_resolve_by_hand_ends_the_episode(settings, store):
    p = policy(store)
    for i in (0, 1):
        await apply(p, "m", i, {("x", "psi"): BREACH})
    async with client(settings, store) as http:
        [a] = (await http.get("/v1/alerts")).json()
        assert a["state"] == "firing"
        acked = (await http.post(f"/v1/alerts/{a['id']}/ack", json={"by": "ana", "comment": "on it"})).json()
        assert (acked["state"], acked["acked_by"], acked["ack_comment"]) == ("acknowledged", "ana", "on it")
        assert [x["id"] for x in (await http.get("/v1/alerts", params={"state": "acknowledged"})).json()] \
            == [a["id"]]
        assert (await http.get("/v1/alerts", params={"state": "firing"})).json() == []
        [incident] = (await http.get("/v1/incidents")).json()
        assert incident["state"] == "open" and incident["alert_count"] == 1

        done = (await http.post(f"/v1/alerts/{a['id']}/resolve", json={"by": "ana"})).json()
        assert done["state"] == "resolved" and done["resolved_by"] == "ana"
        assert (await http.get(f"/v1/incidents/{incident['id']}")).json()["state"] == "resolved"
        again = await http.post(f"/v1/alerts/{a['id']}/ack", json={"by": "bo"})
        assert again.status_code == 409 and again.json()["code"] == "alert_resolved"

        # The series keeps breaching: still the same (resolved) alert for one window,
        # then a new alert once k of m breach again after the resolution.
        await apply(p, "m", 2, {("x", "psi"): BREACH})
        assert [x["state"] for x in (await http.get("/v1/alerts")).json()] == ["resolved"]
        await apply(p, "m", 3, {("x", "psi"): BREACH})
        states = sorted(x["state"] for x in (await http.get("/v1/alerts")).json())
        assert states == ["firing", "resolved"]
        assert len((await http.get("/v1/incidents", params={"state": "open"})).json()) == 1


async def test_alert_endpoints_answer_4xx_naming_the_field(settings, store):
    async with client(settings, store) as http:
        missing = await http.post("/v1/alerts/nope/ack", json={"by": "ana"})
        assert missing.status_code == 404 and missing.json()["field"] == "alert_id"
        await apply(policy(store), "m", 0, {("x", "psi"): BREACH})
        await apply(policy(store), "m", 1, {("x", "psi"): BREACH})
        [a] = (await http.get("/v1/alerts")).json()
        empty = await http.post(f"/v1/alerts/{a['id']}/ack", json={"by": ""})
        assert empty.status_code == 422 and empty.json()["field"] == "by"
        extra = await http.post(f"/v1/alerts/{a['id']}/resolve", json={"by": "a", "when": 1})
        assert extra.status_code == 422 and extra.json()["field"] == "when"
        bad = await http.get("/v1/alerts", params={"severity": "loud"})
        assert bad.status_code == 422 and bad.json()["field"] == "severity"
        assert (await http.get("/v1/incidents/nope")).json()["field"] == "incident_id"
        critical = (await http.get("/v1/alerts", params={"severity": "critical"})).json()
        assert [x["id"] for x in critical] == [a["id"]]


async def test_register_a_model_with_lineage_floors_and_policy(settings, store):
    body = {"model_id": "fraud", "owner": "payments", "tier": 1, "window_seconds": 600,
            "features": {"amount": {"type": "numeric", "source": "payments_db"},
                         "country": {"type": "categorical"}},
            "floors": {"psi": 0.3}, "persistence": {"k": 1, "m": 2, "resolve_after": 4},
            "routing": {"team": "payments"}}
    async with client(settings, store) as http:
        created = await http.post("/v1/models", json=body)
        assert created.status_code == 201
        assert (await http.post("/v1/models", json=body)).status_code == 409
        [m] = (await http.get("/v1/models")).json()
        cfg = m["config"]
        assert (m["model_id"], cfg["tier"], cfg["owner"], cfg["window_seconds"]) == (
            "fraud", 1, "payments", 600)
        assert cfg["features"]["amount"] == {"type": "numeric", "source": "payments_db"}
        assert cfg["persistence"] == {"k": 1, "m": 2, "resolve_after": 4}
        det = (await http.get("/v1/models/fraud/detector-config")).json()
        assert det["effective"]["floors"]["psi"] == 0.3 and det["effective"]["floors"]["js"] == 0.1

        for field, patch in [("floors", {"floors": {"nope": 1.0}}),
                             ("features.amount.type", {"features": {"amount": {"type": "text"}}}),
                             ("persistence", {"persistence": {"k": 3, "m": 2}}),
                             ("tier", {"tier": 4}), ("model_id", {"model_id": ""})]:
            resp = await http.post("/v1/models", json={**body, "model_id": "other", **patch})
            assert resp.status_code == 422 and resp.json()["field"] == field, (field, resp.json())
    assert (await AlertStore(store.r).alerts(None, 0, 10)) == []


async def test_registered_lineage_and_policy_reach_the_alerts(settings, store):
    async with client(settings, store) as http:
        await http.post("/v1/models", json={
            "model_id": "m", "tier": 1, "persistence": {"k": 1, "m": 1, "resolve_after": 1},
            "features": {"x": {"type": "numeric", "source": "feed"}}})
        config = (await store.model_configs(["m"]))["m"]
        p = policy(store)
        await apply(p, "m", 0, {("x", "psi"): BREACH}, config)
        [a] = (await http.get("/v1/alerts")).json()
        assert (a["group_key"], a["source"], a["severity"], a["state"]) == (
            "source:feed", "feed", "critical", "firing")
        await apply(p, "m", 1, {("x", "psi"): HEALTHY}, config)
        [incident] = (await http.get("/v1/incidents", params={"model": "m"})).json()
        assert incident["state"] == "resolved" and incident["title"] == "upstream source feed failing"


async def test_state_and_severity_filter_before_paging(settings, store):
    """A page holds ``limit`` matching alerts: the filters select, then ``limit`` and
    ``offset`` page what they selected (a newer non-matching alert takes no slot)."""
    p = policy(store)
    for i in (0, 1):
        await apply(p, "m", i, {("x", "psi"): BREACH})
    for i in (2, 3):
        await apply(p, "m", i, {("x", "psi"): BREACH, ("y", "psi"): BREACH})
    async with client(settings, store) as http:
        alerts = (await http.get("/v1/alerts")).json()
        assert len(alerts) == 2
        newest, other = alerts
        await http.post(f"/v1/alerts/{newest['id']}/ack", json={"by": "ana"})
        firing = (await http.get("/v1/alerts", params={"state": "firing", "limit": 1})).json()
        assert [a["id"] for a in firing] == [other["id"]]
        acked = (await http.get("/v1/alerts", params={"state": "acknowledged", "limit": 1})).json()
        assert [a["id"] for a in acked] == [newest["id"]]
        assert (await http.get("/v1/alerts", params={"state": "firing", "offset": 1})).json() == []
        severity = other["severity"]
        same = (await http.get("/v1/alerts", params={"severity": severity, "offset": 1})).json()
        assert len(same) == sum(a["severity"] == severity for a in alerts) - 1


async def test_incident_filters_select_before_paging(settings, store):
    p = policy(store)
    for model, feature in (("m", "x"), ("n", "y")):  # one incident per feature
        for i in (0, 1):
            await apply(p, model, i, {(feature, "psi"): BREACH})
    async with client(settings, store) as http:
        newest, older = (await http.get("/v1/incidents")).json()
        other = older["models"][0]
        assert newest["models"] != [other]
        [only] = (await http.get("/v1/incidents", params={"model": other, "limit": 1})).json()
        assert only["id"] == older["id"]
        assert (await http.get("/v1/incidents", params={"model": other, "offset": 1})).json() == []
        assert len((await http.get("/v1/incidents", params={"state": "open", "offset": 1})).json()) == 1
