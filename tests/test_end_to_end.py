"""End to end: SDK -> Kafka -> aggregator -> Redis -> detector -> REST API."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from sdk import AsyncClient
from service.api.app import create_app
from service.profiles.reference import build_reference
from tests.conftest import wait_for
from tests.roles import running

T0 = 1_700_000_100  # start of a 300 s window
MODEL = "credit"


def rows(rng: np.random.Generator, n: int, shift: float = 0.0) -> list[dict]:
    return [
        {
            "income": float(rng.lognormal(10 + shift, 0.5)),
            "age": float(rng.normal(40, 10)),
            "segment": str(rng.choice(["a", "b", "c"], p=[0.5, 0.3, 0.2])),
        }
        for _ in range(n)
    ]


async def replay(settings, store, shift: float) -> list[dict]:
    """Reference from unshifted data, then two windows of live traffic; returns /v1/alerts."""
    rng = np.random.default_rng(11)
    await store.put_reference(MODEL, build_reference(MODEL, rows(rng, 3000)))
    app = create_app(settings, store)
    async with running(settings, store, "aggregator", "detector"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic,
                               linger_ms=10) as client:
            for i, features in enumerate(rows(rng, 2000, shift)):
                client.log_prediction(MODEL, features, model_version="7",
                                      prediction_id=f"p{i}", event_time=T0 + i * 0.2)
            await client.flush()

        async def evaluated() -> bool:
            members = await store.window_members(MODEL, 0, float("inf"))
            return len(members) == 2 and all([await store.results(MODEL, m) is not None
                                               for m in members])

        await wait_for(evaluated, timeout=60)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://test") as http:
        resp = await http.get("/v1/alerts", params={"model": MODEL})
        assert resp.status_code == 200
        alerts = resp.json()
        for a in alerts:
            one = await http.get(f"/v1/alerts/{a['id']}")
            assert one.status_code == 200 and one.json() == a
        return alerts


async def test_injected_shift_raises_an_alert_on_the_api(settings, store):
    alerts = await replay(settings, store, shift=1.0)
    # the shifted feature alone alerts: its distribution and mean (every income times e; its
    # spread is tested on the log scale, where a change of scale leaves it unchanged)
    assert sorted((a["feature"], a["check"]) for a in alerts) == [("income", "mean_shift"), ("income", "psi")]
    [a] = [a for a in alerts if a["check"] == "psi"]
    assert a["model_id"] == MODEL and a["model_version"] == "7" and a["state"] == "firing"
    # Breached in both windows; PSI > 5 x its floor at p < 1e-10 is overwhelming, so it fires at
    # the first window (no k-of-m wait), and the second is evidence of the same alert.
    assert (a["window_start"], a["window_end"], a["fired_window_start"]) == (T0, T0 + 300, T0)
    assert a["evidence_count"] == 2 and a["incident_id"] is not None
    assert a["effect_size"] > 1.0 and a["p_value"] < 1e-10


async def test_control_run_without_shift_raises_no_alert(settings, store):
    assert await replay(settings, store, shift=0.0) == []
    # the reference's bin edges reached the aggregator: every window counted in them exactly
    ref = await store.reference(MODEL)
    assert (await store.edge_sets([MODEL]))[MODEL].keys() == {"income", "age"}
    windows = await store.window_profiles(MODEL, await store.window_members(MODEL, 0, float("inf")))
    assert len(windows) == 2
    for w in windows:
        for name in ("income", "age"):
            rb, wb = ref.features[name].numeric.bins, w.features[name].numeric.bins
            assert rb.source and rb.total == 3_000 and not wb.source
            assert wb.version == rb.version and wb.total == w.features[name].numeric.count > 0
        assert w.features["segment"].numeric.bins is None


@pytest.mark.parametrize("params,field", [
    ({"limit": 0}, "limit"), ({"since": "yesterday"}, "since"), ({"state": "sleeping"}, "state"),
])
async def test_bad_alert_query_is_422_naming_the_parameter(settings, store, params, field):
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://test") as http:
        resp = await http.get("/v1/alerts", params=params)
    assert resp.status_code == 422
    assert resp.json()["field"] == field


async def test_unknown_model_is_404(settings, store):
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://test") as http:
        for path in ("/v1/models/nope/profiles", "/v1/alerts?model=nope"):
            resp = await http.get(path)
            assert resp.status_code == 404
            assert "nope" in resp.json()["message"]
        assert (await http.get("/v1/alerts/nope")).status_code == 404


async def test_profiles_and_models_endpoints(settings, store):
    rng = np.random.default_rng(3)
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://test") as http:
        resp = await http.put(f"/v1/models/{MODEL}", json={"window_seconds": 60})
        assert resp.status_code == 200
        assert (await http.put(f"/v1/models/{MODEL}", json={"window_seconds": 0})).json()["field"] \
            == "window_seconds"
        ref_rows = rows(rng, 500)
        resp = await http.post(f"/v1/models/{MODEL}/reference", json={"rows": ref_rows})
        assert resp.status_code == 200 and resp.json()["count"] == 500
        bad = await http.post(f"/v1/models/{MODEL}/reference", json={"rows": [{"x": [1]}]})
        assert bad.status_code == 422 and bad.json()["field"] == "rows[0].features.x"
        async with running(settings, store, "aggregator"):
            async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic,
                                   linger_ms=10) as client:
                for i in range(1000):  # 100 s of traffic: 600 + 400 records in two 60 s windows
                    client.log_prediction(MODEL, {"x": float(i % 100)}, event_time=T0 + i * 0.1)

            async def stored() -> bool:
                members = await store.window_members(MODEL, 0, float("inf"))
                return sum(p.count for p in await store.window_profiles(MODEL, members)) == 1000

            await wait_for(stored, timeout=60)
        body = (await http.get(f"/v1/models/{MODEL}/profiles",
                               params={"from": T0, "to": T0 + 30})).json()
        [w] = body["windows"]
        assert (w["window_start"], w["window_end"], w["count"]) == (T0, T0 + 60, 600)
        x = w["features"]["x"]
        # 600 values of 100 distinct ones: kept as they are (<= MAX_EXACT_VALUES), so exact
        assert x["null_rate"] == 0.0 and x["exact"] is True and (x["min"], x["max"]) == (0.0, 99.0)
        assert abs(x["quantiles"]["p50"] - 49.0) <= 1.0 and x["quantiles"]["p99"] >= 97.0
        [model] = (await http.get("/v1/models")).json()
        assert (model["model_id"], model["has_reference"]) == (MODEL, True)
        assert {k: model["config"][k] for k in ("window_seconds", "owner", "tier", "features")} == {
            "window_seconds": 60, "owner": None, "tier": 2, "features": {}}
        metrics = (await http.get("/metrics")).text
        assert "fleetwatch_records_aggregated_total" in metrics
        assert (await http.get("/healthz")).json() == {"status": "ok", "redis": True}
