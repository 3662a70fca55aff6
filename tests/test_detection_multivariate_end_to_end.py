"""End to end: two features with identical marginals whose correlation breaks at a known window
(SDK -> Kafka -> aggregator -> Redis -> detector -> REST API)."""

from __future__ import annotations

import httpx
import numpy as np

from sdk import AsyncClient
from service.api.app import create_app
from service.profiles.reference import build_reference
from tests.conftest import wait_for
from tests.roles import running

T0 = 1_700_000_100  # start of a 300 s window
MODEL = "ranker"
WINDOWS = 4
PER_WINDOW = 500
BREAK = 2  # the correlation is 0 from the third window on


def rows(rng: np.random.Generator, n: int, rho: float) -> list[dict]:
    """x and y are N(0, 1) whatever rho; only how they move together changes."""
    xy = rng.multivariate_normal([0.0, 0.0], [[1.0, rho], [rho, 1.0]], size=n)
    return [{"x": float(a), "y": float(b), "segment": str(s)}
            for (a, b), s in zip(xy, rng.choice(["a", "b"], n), strict=True)]


async def test_a_correlation_break_alerts_on_the_model_at_the_break_and_not_before(settings, store):
    rng = np.random.default_rng(23)
    await store.put_reference(MODEL, build_reference(MODEL, rows(rng, 3_000, 0.8)))
    app = create_app(settings, store)
    traffic = [r for w in range(WINDOWS) for r in rows(rng, PER_WINDOW, 0.0 if w >= BREAK else 0.8)]
    step = 300 / PER_WINDOW
    async with running(settings, store, "aggregator", "detector"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic,
                               linger_ms=10) as client:
            for i, features in enumerate(traffic):
                client.log_prediction(MODEL, features, model_version="1",
                                      prediction_id=f"p{i}", event_time=T0 + i * step)
            await client.flush()

        async def evaluated() -> bool:
            members = await store.window_members(MODEL, 0, float("inf"))
            return len(members) == WINDOWS and all([await store.results(MODEL, m) is not None
                                                    for m in members])

        await wait_for(evaluated, timeout=90)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://test") as http:
        alerts = (await http.get("/v1/alerts", params={"model": MODEL})).json()
        drift = {}
        for w in range(WINDOWS):
            resp = await http.get(f"/v1/models/{MODEL}/drift", params={"window": T0 + 300 * w})
            assert resp.status_code == 200, resp.text
            [entry] = resp.json()["windows"]
            drift[w] = {r["check"]: r for r in entry["features"]["__multivariate__"]}
    # the model's numeric features jointly, and nothing else: every marginal held
    assert {a["feature"] for a in alerts} == {"__multivariate__"}
    assert {a["check"] for a in alerts} <= {"correlation", "reconstruction_error"}
    assert all(a["fired_window_start"] == T0 + 300 * BREAK for a in alerts)
    assert len({a["incident_id"] for a in alerts}) == 1  # one incident for the model
    for w in range(WINDOWS):
        cor, rec = drift[w]["correlation"], drift[w]["reconstruction_error"]
        assert cor["n_current"] == PER_WINDOW and cor["n_baseline"] == 3_000
        expected = "drift" if w >= BREAK else "ok"
        assert (cor["status"], rec["status"]) == (expected, expected), (w, cor, rec)
        if w >= BREAK:
            assert "largest change: corr(x, y) 0.8" in cor["reason"] and cor["effect_size"] < -0.9
