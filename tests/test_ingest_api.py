"""HTTP ingest: POST /v1/ingest validates JSON records and produces them to Kafka,
where the aggregator profiles them like the SDK's; a bad batch is refused whole."""

from __future__ import annotations

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
            assert resp.json() == {"accepted": 100, "messages": 1}

            bad = [record(1000), record(1001, features={"amount": [1, 2]}), record(1002)]
            resp = await http.post("/v1/ingest", json={"records": bad})
            assert resp.status_code == 422
            assert resp.json() == {"code": "invalid_record", "field": "records[1].features.amount",
                                   "message": "records[1].features.amount: must be number, string, "
                                              "bool or null, got list"}
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
