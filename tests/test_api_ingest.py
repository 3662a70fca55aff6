"""HTTP ingest: POST /v1/ingest validates JSON records and produces them to Kafka,
where the aggregator profiles them like the SDK's; a bad batch is refused whole."""

from __future__ import annotations

import json

import httpx

from service.api.app import create_app
from tests.conftest import wait_for
from tests.roles import running, window_counts

T0 = 1_700_000_100  # a 300 s window boundary
MODEL = "ingested"


def record(i: int, **over) -> dict:
    data = {"model_id": MODEL, "model_version": "1", "prediction_id": f"h{i}", "event_time": T0 + i * 5.0,
            "features": {"amount": i * 1.5, "country": "DE" if i % 2 else "FR", "new": i % 3 == 0},
            "score": 0.5, "slices": {"channel": "web"}}
    return data | over


async def test_ingested_records_reach_the_aggregator_and_bad_batches_are_refused_whole(settings, store):
    app = create_app(settings, store)
    async with app.router.lifespan_context(app), running(settings, store, "aggregator"):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            good = [record(i) for i in range(100)]  # 60 in the first window, 40 in the next
            resp = await http.post("/v1/ingest", json={"records": good})
            assert resp.status_code == 200, resp.text
            assert resp.json() == {"accepted": 100, "messages": 1, "vectors_dropped": 0}

            bad = [record(1000), record(1001, features={"amount": {"a": 1}}), record(1002)]
            resp = await http.post("/v1/ingest", json={"records": bad})
            assert resp.status_code == 422
            assert resp.json() == {"code": "invalid_record", "field": "records[1].features.amount",
                                   "message": "records[1].features.amount: must be number, string, "
                                              "bool or null, got dict"}
            resp = await http.post("/v1/ingest", json={"records": [record(2000, event_time=None)]})
            assert (resp.status_code, resp.json()["field"]) == (422, "records[0].event_time")
            resp = await http.post("/v1/ingest", json={"records": []})
            assert (resp.status_code, resp.json()["field"]) == (422, "records")

        async def profiled() -> bool:
            return await window_counts(store, MODEL) == {T0: 60, T0 + 300: 40}

        await wait_for(profiled, timeout=60)
    assert app.state.ingest_producer is None  # closed with the app


async def test_ingest_without_a_broker_answers_503(settings, store):
    app = create_app(settings.model_copy(update={"kafka_bootstrap": None}), store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        resp = await http.post("/v1/ingest", json={"records": [record(0)]})
    assert (resp.status_code, resp.json()["code"]) == (503, "ingest_unavailable")


async def test_refused_records_are_counted_per_model_and_reason_in_its_status(settings, store):
    app = create_app(settings.model_copy(update={"kafka_bootstrap": None}), store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        for m in ("counted", "other"):
            assert (await http.post("/v1/models", json={"model_id": m})).status_code == 201

        async def rejected(m: str) -> dict[str, int]:
            resp = await http.get(f"/v1/models/{m}/status")
            assert resp.status_code == 200, resp.text
            return resp.json()["records"]["rejected"]

        assert await rejected("counted") == {}
        bad = [record(0, model_id="counted"), record(1, model_id="counted", features={"amount": {"a": 1}}),
               record(2, model_id="other"), record(3, model_id="nosuch"), record(4, model_id=7)]
        assert (await http.post("/v1/ingest", json={"records": bad})).status_code == 422
        assert await rejected("counted") == {"wrong_type": 1, "in_refused_batch": 1}
        assert await rejected("other") == {"in_refused_batch": 1}
        missing = record(5, model_id="counted", event_time=None)
        resp = await http.post("/v1/ingest", json={"records": [missing]})
        assert resp.status_code == 422
        lone = record(6, model_id="counted", features={"country": "\ud800"})
        resp = await http.post("/v1/ingest", content=json.dumps({"records": [lone]}),
                               headers={"Content-Type": "application/json"})
        assert (resp.status_code, resp.json()["field"]) == (422, "records[0]")
        assert await rejected("counted") == {"wrong_type": 1, "in_refused_batch": 1, "missing_field": 1,
                                             "unencodable": 1}
        # an accepted batch the broker cannot take (503) refuses no record: nothing counted
        resp = await http.post("/v1/ingest", json={"records": [record(7, model_id="counted")]})
        assert resp.status_code == 503
        assert sum((await rejected("counted")).values()) == 4
        # no counter for a model that does not exist
        assert (await http.get("/v1/models/nosuch/status")).status_code == 404
        assert await store.r.keys("*nosuch*") == []
