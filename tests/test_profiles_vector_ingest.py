"""Vector features end to end: the SDK and HTTP ingest carry them to the aggregator, which
profiles them per window; a bad vector drops that record's vector only, counted by reason."""

from __future__ import annotations

import array

import httpx
import numpy as np
from aiokafka import AIOKafkaProducer

from sdk import AsyncClient
from sdk.columns import RecordColumns
from sdk.wire import encode_columns
from service.api.app import create_app
from service.registry import ModelConfig
from tests.conftest import wait_for
from tests.roles import running

T0 = 1_700_000_100  # a 300 s window boundary
DIM = 16


async def _vectors(store, model_id: str):
    members = await store.window_members(model_id, 0, float("inf"))
    return [p for p in await store.window_profiles(model_id, members) if "emb" in p.vectors]


async def test_sdk_vectors_are_profiled_and_bad_ones_dropped_from_their_records(settings, store):
    """300 records logged with a 16-d float32 array, 5 of them with a NaN (the SDK drops the
    vector, keeps the record), and a message from another producer whose 4 vectors have 8
    dimensions against the declared 16 (the aggregator dead-letters and counts them, and
    profiles the records without them)."""
    await store.put_model_config("vec", ModelConfig(vector_features={"emb": DIM}))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, DIM)).astype(np.float32) + 1.0
    app = create_app(settings, store)
    async with running(settings, store, "aggregator"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic, linger_ms=10) as fw:
            for i in range(300):
                v = x[i].copy()
                if i % 60 == 0:
                    v[3] = np.nan
                fw.log_prediction("vec", {"amount": float(i), "emb": v}, prediction_id=f"p{i}",
                                  event_time=T0 + i * 0.5, model_version="1")
            await fw.flush()
            assert fw.stats.sent == 300 and fw.stats.vectors_dropped_invalid == 5
        short = RecordColumns("vec", ["1"] * 4, [f"s{i}" for i in range(4)], [T0 + 1.0] * 4,
                              {"amount": [1.0] * 4})
        short.vectors = {"emb": [array.array("f", [0.5] * 8).tobytes()] * 4}
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(settings.predictions_topic, encode_columns(short), key=b"vec")
        finally:
            await producer.stop()

        async def profiled() -> bool:
            got = await _vectors(store, "vec")
            return len(got) == 1 and got[0].count == 304

        await wait_for(profiled, timeout=60)
    p = (await _vectors(store, "vec"))[0]
    emb = p.vectors["emb"]
    kept = np.array([i % 60 != 0 for i in range(300)])
    assert (emb.dim, emb.count, emb.nulls) == (DIM, 295, 9)
    np.testing.assert_allclose(emb.mean, x[kept].astype(np.float64).mean(0), rtol=1e-9)
    assert p.features["amount"].numeric.count == 304
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        status = (await http.get("/v1/models/vec/status")).json()["records"]
    assert status["dead_lettered"] == {"vector_dimension": 4}


async def test_http_ingest_carries_json_vectors_and_drops_bad_ones(settings, store):
    """Also: past max_vector_features_per_model (2 here), an undeclared vector feature is not
    profiled."""
    settings = settings.model_copy(update={"max_vector_features_per_model": 2})
    app = create_app(settings, store)
    async with app.router.lifespan_context(app), running(settings, store, "aggregator"):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            assert (await http.post("/v1/models", json={"model_id": "hv"})).status_code == 201
            bad_dim = await http.put("/v1/models/hv", json={"vector_features": {"emb": 1}})
            assert (bad_dim.status_code, bad_dim.json()["field"]) == (422, "vector_features.emb")
            records = [{"model_id": "hv", "model_version": "1", "prediction_id": f"h{i}",
                        "event_time": T0 + i, "features": {"x": 1.0, "emb": [i * 0.1, 1.0, 2.0],
                                                           "e1": [1.0, 2.0], "e2": [3.0, 4.0]}}
                       for i in range(20)]
            records[3]["features"]["emb"] = [1.0, 2.0]  # the batch's first vector has 3 dimensions
            records[4]["features"]["emb"] = [1.0, "a", 2.0]
            records[5]["features"]["emb"] = [1.0] * 5000
            resp = await http.post("/v1/ingest", json={"records": records})
            assert resp.status_code == 200, resp.text
            assert resp.json() == {"accepted": 20, "messages": 1, "vectors_dropped": 3}
            rejected = (await http.get("/v1/models/hv/status")).json()["records"]["rejected"]
            assert rejected == {"vector_dimension": 2, "vector_wrong_type": 1}

        async def profiled() -> bool:
            got = await _vectors(store, "hv")
            return len(got) == 1 and got[0].count == 20

        await wait_for(profiled, timeout=60)
    [p] = await _vectors(store, "hv")
    assert p.vectors.keys() == {"emb", "e1"}
    emb = p.vectors["emb"]
    assert (emb.dim, emb.count, emb.nulls) == (3, 17, 3)
    kept = [i * 0.1 for i in range(20) if i not in (3, 4, 5)]
    assert abs(emb.mean[0] - np.float32(kept).astype(np.float64).mean()) < 1e-12  # float32 on the wire


async def test_http_ingest_holds_vectors_to_their_declared_dimension(settings, store):
    """A declared dimension is checked at the edge: a batch whose first vector is short drops
    that one, not the 19 of the declared length that follow it (before, the batch's first
    vector set the length for the rest)."""
    app = create_app(settings, store)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            resp = await http.post("/v1/models", json={"model_id": "hd", "vector_features": {"emb": 3}})
            assert resp.status_code == 201, resp.text
            records = [{"model_id": "hd", "model_version": "1", "prediction_id": f"d{i}",
                        "event_time": T0 + i, "features": {"emb": [1.0, 2.0, float(i)]}}
                       for i in range(20)]
            records[0]["features"]["emb"] = [1.0, 2.0]
            resp = await http.post("/v1/ingest", json={"records": records})
            assert resp.json() == {"accepted": 20, "messages": 1, "vectors_dropped": 1}
            rejected = (await http.get("/v1/models/hd/status")).json()["records"]["rejected"]
            assert rejected == {"vector_dimension": 1}
