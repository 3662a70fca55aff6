"""Alerts and incidents stored before the store was typed read back unchanged, and the typed
policy writes the very JSON it wrote then.

The literals are what the alert policy stored for two alerts of one incident (a PSI alert
inhibited by a null-rate alert on the same feature, then acknowledged) before alerts became
:class:`~service.alerting.models.Alert` objects, captured from Redis byte for byte.
"""

from __future__ import annotations

import json

import httpx

from service.alerting.keys import ALERTS, OPEN, alert_key, incident_key, model_alerts_key
from service.alerting.models import Alert
from service.alerting.store import AlertStore, read_alert
from service.api.app import create_app
from service.registry import ModelConfig
from tests.test_alerting_policy import BREACH, apply, policy

PSI_ID, NULL_RATE_ID, INCIDENT_ID = "f49b3c71f0a95c986c66", "161dcdd5f3795c5766a1", "2a100198b4e7e6b9239d"
BODY_PSI = (
    '{"id": "f49b3c71f0a95c986c66", "model_id": "fraud", "model_version": "1", '
    '"feature": "amount", "check": "psi", "state": "firing", "severity": "critical", '
    '"owner": "payments-ml", "tier": 1, "routing": {"team": "payments"}, '
    '"group_key": "source:payments_db", "source": "payments_db", "incident_id": null, '
    '"window_start": 1700006400, "window_end": 1700006700, '
    '"window_start_local": "2023-11-15T00:00:00+00:00", "fired_window_start": 1700006700, '
    '"last_window_start": 1700007000, "resolved_window_start": null, "effect_size": 1.0, '
    '"floor": 0.2, "p_value": 1e-08, "evidence_count": 3, '
    '"evidence": [{"window_start": 1700006400, "effect_size": 1.0, "p_value": 1e-08}, '
    '{"window_start": 1700006700, "effect_size": 1.0, "p_value": 1e-08}, '
    '{"window_start": 1700007000, "effect_size": 1.0, "p_value": 1e-08}], '
    '"inhibited_by": ["161dcdd5f3795c5766a1"], "seq": 3, "created_at": 1700007001.5, '
    '"updated_at": 1700007001.5, "silenced_by": [], "notify": false}')
#: The null-rate alert's body: the PSI alert's but for its id, its check and its inhibition.
BODY_NULL_RATE = (BODY_PSI.replace(PSI_ID, NULL_RATE_ID).replace('"check": "psi"', '"check": "null_rate"')
                  .replace(f'"inhibited_by": ["{NULL_RATE_ID}"]', '"inhibited_by": []')
                  .replace('"notify": false', '"notify": true'))
INCIDENT = ('{"id": "2a100198b4e7e6b9239d", "group_key": "source:payments_db", "source": "payments_db", '
            '"title": "upstream source payments_db failing", "created_at": 1700007001.5}')
#: The hashes' own fields beside the body: the first write's time, the incident, the user's actions.
PSI_FIELDS = {"state": "firing", "created_at": "1700007001.5", "seq": "3", "incident_id": INCIDENT_ID,
              "acked_by": "ana", "acked_at": "1700007301.2", "ack_comment": "fixing"}
NULL_RATE_FIELDS = {"state": "firing", "created_at": "1700007001.5", "seq": "3", "incident_id": INCIDENT_ID}
STORED = ((PSI_ID, BODY_PSI, PSI_FIELDS), (NULL_RATE_ID, BODY_NULL_RATE, NULL_RATE_FIELDS))
#: What the store answered for the PSI alert then (the API's JSON is the same).
PSI_READ = {**json.loads(BODY_PSI), "state": "acknowledged", "incident_id": INCIDENT_ID,
            "acked_at": "1700007301.2", "acked_by": "ana", "ack_comment": "fixing"}
CONFIG = ModelConfig.model_validate({"owner": "payments-ml", "tier": 1, "routing": {"team": "payments"},
                                     "features": {"amount": {"type": "numeric", "source": "payments_db"}}})


def encoded(fields: dict[str, str], body: str) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in {**fields, "body": body}.items()}


def test_a_stored_body_reads_back_typed_and_serialises_to_the_same_bytes():
    for body in (BODY_PSI, BODY_NULL_RATE):
        alert = Alert.model_validate_json(body)
        assert json.dumps(alert.body()) == body
    psi = read_alert(alert_key(PSI_ID), encoded(PSI_FIELDS, BODY_PSI))
    assert psi is not None and psi.model_dump(exclude_unset=True) == PSI_READ
    assert (psi.state, psi.incident_id, psi.inhibited_by, psi.notify) == (
        "acknowledged", INCIDENT_ID, [NULL_RATE_ID], False)
    assert [e.window_start for e in psi.evidence] == [1_700_006_400, 1_700_006_700, 1_700_007_000]


def test_a_hash_without_a_body_or_with_a_body_that_does_not_parse_is_left_out():
    assert read_alert("k", encoded(PSI_FIELDS, "{}")) is None
    assert read_alert("k", {b"seq": b"3"}) is None
    assert read_alert("k", encoded(PSI_FIELDS, BODY_PSI.replace('"tier": 1', '"tier": "one"'))) is None


async def test_the_policy_writes_the_json_it_wrote_before_types(store):
    p = policy(store)
    for i in range(3):
        await apply(p, "fraud", i, {("amount", "psi"): BREACH, ("amount", "null_rate"): BREACH}, CONFIG,
                    now=1_700_007_001.5)
    await AlertStore(store.r).act(PSI_ID, {"acked_by": "ana", "acked_at": "1700007301.2",
                                           "ack_comment": "fixing"})
    for aid, body, fields in STORED:
        assert await store.r.hgetall(alert_key(aid)) == encoded(fields, body)
    assert (await store.r.get(incident_key(INCIDENT_ID))).decode() == INCIDENT


async def test_alerts_and_incidents_stored_before_types_read_back_through_store_and_api(settings, store):
    for aid, body, fields in STORED:
        await store.r.hset(alert_key(aid), mapping=encoded(fields, body))
        for index in (ALERTS, model_alerts_key("fraud")):
            await store.r.zadd(index, {aid: 1_700_007_001.5})
        await store.r.sadd(OPEN, aid)
    await store.r.set(incident_key(INCIDENT_ID), INCIDENT)
    await store.r.sadd(f"{incident_key(INCIDENT_ID)}:alerts", PSI_ID, NULL_RATE_ID)

    alerts = AlertStore(store.r)
    [psi] = [a for a in await alerts.alerts("fraud", 0, 10) if a.id == PSI_ID]
    assert psi.model_dump(exclude_unset=True) == PSI_READ
    assert sorted(a.id for a in await alerts.open_alerts()) == sorted([PSI_ID, NULL_RATE_ID])
    incident = await alerts.incident(INCIDENT_ID)
    assert incident is not None
    assert (incident.state, incident.severity, incident.models, incident.checks, incident.alert_count) == (
        "open", "critical", ["fraud"], ["null_rate", "psi"], 2)
    assert incident.record().model_dump() == json.loads(INCIDENT)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                                 base_url="http://t") as http:
        assert (await http.get(f"/v1/alerts/{PSI_ID}")).json() == PSI_READ
        got = (await http.get(f"/v1/incidents/{INCIDENT_ID}")).json()
        assert {a["id"]: a for a in got["alerts"]}[PSI_ID] == PSI_READ
        assert {k: got[k] for k in json.loads(INCIDENT)} == json.loads(INCIDENT)
