"""Records of models never registered create them implicitly only within budgets
(``implicit_models_per_minute``, ``implicit_models_max``): beyond them ingest answers
429/422 naming the record and the aggregator dead-letters the records with reason
``implicit_model_limit``, both counted; registered models are never affected."""

from __future__ import annotations

import httpx
from aiokafka import AIOKafkaProducer
from prometheus_client import REGISTRY

from sdk.record import PredictionRecord
from sdk.wire import encode_batch
from service.api import ingest
from service.api.app import create_app
from service.registry import ModelConfig
from tests.conftest import wait_for
from tests.roles import running, window_counts
from tests.test_profiles_bad_input import dead_lettered

T0 = 1_700_000_100
MINUTE = 1_700_000_040  # a minute boundary (divisible by 60)


def implicit(outcome: str) -> float:
    return REGISTRY.get_sample_value("fleetwatch_implicit_models_total", {"outcome": outcome}) or 0.0


def record(model_id: str, i: int = 0) -> dict:
    return {"model_id": model_id, "model_version": "1", "prediction_id": f"{model_id}-{i}",
            "event_time": T0 + i, "features": {"x": float(i)}}


async def test_store_budgets_per_minute_and_in_total(store):
    await store.put_model_config("registered", ModelConfig())
    before = {o: implicit(o) for o in ("created", "refused_rate", "refused_total")}
    got = await store.admit_models([f"a{i}" for i in range(5)] + ["registered"], 3, 5, MINUTE)
    assert got == {"a0": "created", "a1": "created", "a2": "created", "a3": "refused_rate",
                   "a4": "refused_rate", "registered": "known"}
    assert await store.admit_models(["a0", "a3"], 3, 5, MINUTE + 59) == {"a0": "known", "a3": "refused_rate"}
    # the next minute has a new budget, up to the total
    got = await store.admit_models(["a3", "a4", "a5"], 3, 5, MINUTE + 60)
    assert got == {"a3": "created", "a4": "created", "a5": "refused_total"}
    assert set(await store.models()) == {"registered", "a0", "a1", "a2", "a3", "a4"}
    # all or nothing: nothing is created when one is refused
    assert (await store.admit_models(["b0", "b1"], 10, 6, MINUTE + 120, all_or_nothing=True)
            == {"b0": "created", "b1": "refused_total"})
    assert "b0" not in await store.models()
    assert implicit("created") - before["created"] == 5
    assert implicit("refused_rate") - before["refused_rate"] == 3
    assert implicit("refused_total") - before["refused_total"] == 2


async def test_ingest_refuses_a_batch_that_creates_too_many_models(settings, store):
    await store.put_model_config("registered", ModelConfig())
    app = create_app(settings.model_copy(update={"implicit_models_max": 3}), store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        batch = [record("registered")] + [record(f"m{i}") for i in range(9_999)]
        resp = await http.post("/v1/ingest", json={"records": batch})
        assert resp.status_code == 422, resp.text
        assert resp.json()["code"] == "implicit_model_limit"
        assert resp.json()["field"] == "records[4].model_id"  # m0..m2 fit, m3 does not
        assert await store.models() == ["registered"]  # all or nothing: none created
        resp = await http.post("/v1/ingest", json={"records": [record(f"m{i}") for i in range(3)]})
        assert resp.status_code == 200, resp.text
        resp = await http.post("/v1/ingest", json={"records": [record("m3")]})
        assert resp.status_code == 422
        resp = await http.post("/v1/ingest", json={"records": [record("registered", 1), record("m0", 1)]})
        assert resp.status_code == 200, resp.text  # registered and created models are unaffected
    await ingest.close(app)
    rate_app = create_app(settings.model_copy(update={"implicit_models_per_minute": 0}), store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=rate_app), base_url="http://t") as http:
        resp = await http.post("/v1/ingest", json={"records": [record("fresh")]})
        assert resp.status_code == 429 and 1 <= int(resp.headers["retry-after"]) <= 60


async def test_aggregator_dead_letters_records_of_models_beyond_the_budget(settings, store):
    settings = settings.model_copy(update={"implicit_models_max": 3})
    await store.put_model_config("registered", ModelConfig())
    app = create_app(settings, store)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
    before = dead_lettered((await http.get("/metrics")).text).get("implicit_model_limit", 0)
    models = ["registered"] + [f"m{i}" for i in range(8)]
    async with running(settings, store, "aggregator"):
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        await producer.start()
        try:
            for m in models:  # one message each: three of m0..m7 fit the budget
                records = [PredictionRecord(m, "1", f"{m}{i}", T0 + i, {"x": 1.0}) for i in range(10)]
                await producer.send_and_wait(settings.predictions_topic, encode_batch(records),
                                             key=m.encode())
        finally:
            await producer.stop()

        async def done() -> bool:
            refused = dead_lettered((await http.get("/metrics")).text).get("implicit_model_limit", 0)
            counts = [sum((await window_counts(store, m)).values()) for m in models]
            # dead letters are at least once (a rebalance replays them); windows exactly once
            return refused - before >= 50 and sum(counts) == 40

        await wait_for(done, timeout=120)
    await http.aclose()
    stored = {m: sum((await window_counts(store, m)).values()) for m in models}
    stored = {m: n for m, n in stored.items() if n}
    assert "registered" in stored and len(stored) == 4 and set(stored.values()) == {10}
    assert set(await store.models()) == set(stored)
