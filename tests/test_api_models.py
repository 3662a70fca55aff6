"""The model resource on a real Redis: read back, merge-patch, delete, reference summary,
404 model_not_found for a model that does not exist."""

from __future__ import annotations

import httpx
import numpy as np
import pytest_asyncio

from service.api.app import create_app
from service.profiles.keys import pending_key, status_key, window_member
from service.profiles.partition import _open_field

MODEL = "fraud"
T0 = 1_700_006_400
REGISTRATION = {"model_id": MODEL, "owner": "payments-ml", "tier": 1, "window_seconds": 60,
                "features": {"amount": {"type": "numeric", "source": "payments_db"},
                             "country": {"type": "categorical", "source": "geo_ip"},
                             "fee": {"type": "numeric", "source": "payments_db"}},
                "routing": {"team": "payments", "channel": "#fraud"},
                "performance": {"threshold": 0.7}}


@pytest_asyncio.fixture
async def http(settings, store):
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client


async def test_a_registered_model_reads_back_with_lineage_and_reference(http):
    assert (await http.post("/v1/models", json=REGISTRATION)).status_code == 201
    body = (await http.get(f"/v1/models/{MODEL}")).json()
    assert body["registered"] is True and body["config"]["tier"] == 1
    assert body["config"]["performance"]["threshold"] == 0.7
    assert body["lineage"] == {"geo_ip": ["country"], "payments_db": ["amount", "fee"]}
    assert body["baseline"] == {"configured": "auto", "last_used": None}
    assert body["reference"] is None
    missing = await http.get(f"/v1/models/{MODEL}/reference")
    assert (missing.status_code, missing.json()["code"]) == (404, "reference_not_found")
    rng = np.random.default_rng(0)
    rows = [{"amount": float(a), "country": c, "score": float(s)}
            for a, c, s in zip(rng.lognormal(3, 1, 300), rng.choice(["de", "fr"], 300), rng.random(300),
                               strict=True)]
    resp = await http.post(f"/v1/models/{MODEL}/reference", json={"rows": rows, "score_column": "score"})
    assert resp.status_code == 200
    assert (await http.get(f"/v1/models/{MODEL}")).json()["reference"] == {
        "count": 300, "features": ["amount", "country"]}
    ref = (await http.get(f"/v1/models/{MODEL}/reference")).json()
    assert ref["count"] == 300 and set(ref["features"]) == {"amount", "country"}
    assert ref["features"]["amount"]["kind"] == "numeric" and ref["features"]["amount"]["count"] == 300
    assert ref["features"]["country"]["top"] == {
        c: int(n) for c, n in zip(*np.unique([r["country"] for r in rows], return_counts=True), strict=True)}
    assert ref["score"]["count"] == 300
    assert set(ref["edges"]) == {"amount", "__score__"}  # bins derived from the rows at upload
    edges = ref["edges"]["amount"]["edges"]
    assert edges == sorted(edges) and len(edges) > 10 and edges[0] > min(r["amount"] for r in rows)
    assert ref["edges"]["amount"]["version"] != ref["edges"]["__score__"]["version"]


async def test_patch_changes_one_field_and_keeps_the_rest(http):
    await http.post("/v1/models", json=REGISTRATION)
    resp = await http.patch(f"/v1/models/{MODEL}", json={"routing": {"channel": "#oncall"}, "owner": None})
    assert resp.status_code == 200, resp.text
    config = (await http.get(f"/v1/models/{MODEL}")).json()["config"]
    assert config["routing"] == {"team": "payments", "channel": "#oncall"}  # merged, not replaced
    assert config["owner"] is None  # null: back to the default
    assert config["tier"] == 1 and config["window_seconds"] == 60
    assert config["performance"]["threshold"] == 0.7
    assert set(config["features"]) == {"amount", "country", "fee"}
    # a nested object merges into the stored one
    resp = await http.patch(f"/v1/models/{MODEL}", content='{"performance": {"task": "regression"}}',
                            headers={"content-type": "application/merge-patch+json"})
    assert resp.status_code == 200, resp.text
    perf = resp.json()["config"]["performance"]
    assert (perf["task"], perf["threshold"]) == ("regression", 0.7)


async def test_patch_is_validated_like_put_and_names_the_field(http):
    await http.post("/v1/models", json=REGISTRATION)
    before = (await http.get(f"/v1/models/{MODEL}")).json()
    for patch, field in (({"tier": 7}, "tier"), ({"window_seconds": "60"}, "window_seconds"),
                         ({"performance": {"threshold": 2}}, "performance.threshold"),
                         ({"nosuch": 1}, "nosuch"), ({"features": {"x": {"type": "vector3"}}},
                                                     "features.x.type")):
        resp = await http.patch(f"/v1/models/{MODEL}", json=patch)
        assert (resp.status_code, resp.json()["field"]) == (422, field), resp.text
        put = await http.put(f"/v1/models/{MODEL}", json={**before["config"], **patch})
        assert put.status_code == 422 and put.json()["field"] == field
    assert (await http.get(f"/v1/models/{MODEL}")).json() == before  # nothing stored
    not_object = await http.patch(f"/v1/models/{MODEL}", json=[1])
    assert not_object.status_code == 422


async def test_unknown_models_are_404_model_not_found_everywhere(http, store):
    calls = [("GET", ""), ("PATCH", ""), ("DELETE", ""), ("GET", "/reference"), ("GET", "/drift"),
             ("GET", "/profiles"), ("GET", "/detector-config")]
    for method, suffix in calls:
        body = {"tier": 1} if method == "PATCH" else None
        resp = await http.request(method, f"/v1/models/nosuch{suffix}", json=body)
        assert (resp.status_code, resp.json()["code"]) == (404, "model_not_found"), (method, suffix)
    resp = await http.post("/v1/models/nosuch/reference", json={"rows": [{"x": 1.0}]})
    assert (resp.status_code, resp.json()["code"]) == (404, "model_not_found")
    assert await store.models() == []  # the upload did not create the model


async def test_delete_removes_every_key_of_the_model_and_only_its_own(http, store):
    tricky = f"{MODEL}}}:x"  # its keys, fw:{fraud}:x}:..., match the pattern fw:{fraud}:*
    for model_id in (MODEL, tricky, "other"):
        await http.post("/v1/models", json={**REGISTRATION, "model_id": model_id})
    await http.post(f"/v1/models/{MODEL}/reference", json={"rows": [{"amount": 1.0}]})
    await http.put(f"/v1/models/{MODEL}/detector-config", json={"alpha": 0.001})
    member = window_member(60, 1_700_000_040, "1")
    await store.r.zadd(pending_key(MODEL), {member: 1_700_000_040})
    await store.count_window(MODEL, member, 1_700_000_040, {"evaluated": 1},
                             {"last_baseline": "reference"}, 0)

    async def keys(pattern: str) -> list[bytes]:
        return sorted([k async for k in store.r.scan_iter(match=pattern)])

    others = await keys("fw:{other}:*")
    tricky_keys = [k for k in await keys("fw:{fraud}:*") if k.startswith(b"fw:{fraud}:x}:")]
    assert tricky_keys
    resp = await http.delete(f"/v1/models/{MODEL}")
    assert resp.status_code == 200, resp.text
    # configuration, detector configuration, reference and its bin edges, pending, status and
    # its counted set
    assert resp.json()["deleted_keys"] == 7
    assert "alerts and incidents" in " ".join(resp.json()["kept"])
    assert await keys("fw:{fraud}:*") == tricky_keys
    assert await keys("fw:{other}:*") == others
    assert await store.models() == sorted(["other", tricky])
    assert not await store.r.exists(status_key(MODEL))
    assert (await http.get(f"/v1/models/{MODEL}")).status_code == 404
    assert (await http.get(f"/v1/models/{tricky}")).json()["config"]["tier"] == 1
    again = await http.delete(f"/v1/models/{MODEL}")
    assert (again.status_code, again.json()["code"]) == (404, "model_not_found")


async def test_status_counts_each_window_once_with_its_baseline_fdr_and_labels(http, settings, store):
    from service.cohorts.store import CohortStore
    from service.detection.detector import Detector
    from tests.test_detection_worker import put_window, rows

    rng = np.random.default_rng(5)
    await http.post("/v1/models", json={"model_id": "fraud", "tier": 1, "performance": {}})
    status = (await http.get("/v1/models/fraud/status")).json()
    assert status["windows"] == {"open": 0, "closed": 0, "pending_policy": 0, "evaluated": 0, "skipped": {},
                                 "abandoned": 0}
    assert status["last_evaluated"] is None and status["fdr"] is None
    assert status["labels"] == {k: 0 for k in ("joined", "duplicate", "relabeled", "unknown", "late",
                                                "invalid", "pending")}
    detector = Detector(settings, store)
    first = await put_window(store, T0, rows(rng, 400))
    await detector.evaluate("fraud", first)  # no reference, no past windows: no baseline
    status = (await http.get("/v1/models/fraud/status")).json()
    assert status["windows"]["skipped"] == {"no_baseline": 1} and status["windows"]["evaluated"] == 0
    await http.post("/v1/models/fraud/reference", json={"rows": rows(rng, 2000)})
    second = await put_window(store, T0 + 300, rows(rng, 700, shift=1.0))
    lost = T0 - 86_400  # a window whose event was lost, a day before the next one evaluated
    await store.r.zadd(pending_key(MODEL), {window_member(300, lost, "1"): lost})
    for _ in range(2):  # evaluated again (a restarted replica): counted once
        await detector.evaluate("fraud", second)
    cohorts = CohortStore(store.r)
    await cohorts.count("fraud", "joined", 1064)
    await cohorts.park("fraud", "p1", 1, T0 + 10.0)
    await store.r.hset(f"fw:agg:{settings.predictions_topic}:0", mapping={
        "late:fraud": 3, "fut:fraud": 2, "cu:fraud": T0,
        # the next window, open in two versions, and another model's open window
        _open_field(("fraud", "1", 300, T0 + 600)): b"", _open_field(("fraud", "2", 300, T0 + 600)): b"",
        _open_field(("fraud}:x", "1", 300, T0 + 900)): b""})
    status = (await http.get("/v1/models/fraud/status")).json()
    assert status["windows"] == {"open": 1, "closed": 2, "pending_policy": 0, "evaluated": 1,
                                 "skipped": {"no_baseline": 1}, "abandoned": 1}
    assert status["records"] == {"in_evaluated_windows": 700, "late": 3, "future": 2,
                                 "dead_lettered": {"late": 3, "future_event_time": 2}, "rejected": {}}
    last = status["last_evaluated"]
    assert (last["window_start"], last["window_end"], last["baseline"]) == (T0 + 300, T0 + 600, "reference")
    assert status["baseline"] == {"configured": "auto", "last_used": "reference"}
    assert status["fdr"]["window_start"] == T0 + 300 and status["fdr"]["tests"] > 0
    assert 0 < status["fdr"]["level"] < 1 and 0 <= status["fdr"]["discoveries"] <= status["fdr"]["tests"]
    assert status["labels"]["joined"] == 1064 and isinstance(status["labels"]["joined"], int)
    assert status["labels"]["pending"] == 1


async def test_an_unreadable_stored_configuration_reads_back_as_such_and_patch_refuses_it(http, store):
    from service.profiles.keys import config_key

    await http.post("/v1/models", json=REGISTRATION)
    await store.r.set(config_key(MODEL), '{"window_seconds": null}')  # written by hand
    body = (await http.get(f"/v1/models/{MODEL}")).json()
    assert body["config"] is None and "window_seconds" in body["config_error"]
    resp = await http.patch(f"/v1/models/{MODEL}", json={"tier": 1})
    assert (resp.status_code, resp.json()["code"]) == (409, "config_unreadable")
    assert (await http.put(f"/v1/models/{MODEL}", json={"tier": 1})).status_code == 200
    assert (await http.patch(f"/v1/models/{MODEL}", json={"owner": "x"})).json()["config"]["tier"] == 1
