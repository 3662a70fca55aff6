"""Every window length the API accepts works end to end (SDK -> Kafka -> aggregator ->
Redis -> detector -> REST API): a 31-day window is evaluated against its reference, and
a seasonal baseline that cannot exist for it (the window is longer than the week) falls
back to the trailing windows with the reason in the result, never an exception."""

from __future__ import annotations

import httpx
import numpy as np

from detectors.config import DetectorConfig
from sdk import AsyncClient
from service.api.app import create_app
from service.profiles.reference import build_reference
from service.registry import ModelConfig
from tests.conftest import wait_for
from tests.roles import running

MONTH = 31 * 86_400
T0 = (1_600_000_000 // MONTH + 1) * MONTH  # a 31-day window start, event time in the past
WINDOWS = 3
PER_WINDOW = 300  # ten records a day


def rows(rng: np.random.Generator, n: int) -> list[dict]:
    return [{"amount": float(rng.lognormal(3, 1)), "country": str(rng.choice(["de", "fr"]))}
            for _ in range(n)]


async def month_windows(settings, store, model: str, reference: bool) -> dict:
    """Three 31-day windows of one model through the pipeline; GET /drift of each (the
    first window of a model without a reference has no baseline: no results)."""
    rng = np.random.default_rng(31)
    await store.put_model_config(model, ModelConfig(window_seconds=MONTH))
    if reference:
        await store.put_reference(model, build_reference(model, rows(rng, 2_000)))
    async with running(settings, store, "aggregator", "detector"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic,
                               linger_ms=10) as client:
            for w in range(WINDOWS):
                for i, features in enumerate(rows(rng, PER_WINDOW)):
                    client.log_prediction(model, features, prediction_id=f"{w}-{i}",
                                          event_time=T0 + w * MONTH + i * (MONTH / PER_WINDOW))
            await client.flush()

        async def evaluated() -> bool:
            members = await store.window_members(model, 0, float("inf"))
            tested = sorted(members)[0 if reference else 1:]
            return len(members) == WINDOWS and all(
                [await store.results(model, m) is not None for m in tested])

        await wait_for(evaluated, timeout=60)
    app = create_app(settings, store)
    out = {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        for w in range(WINDOWS):
            resp = await http.get(f"/v1/models/{model}/drift", params={"window": T0 + w * MONTH})
            assert resp.status_code == 200, resp.text
            [entry] = resp.json()["windows"]
            assert entry["window_end"] - entry["window_start"] == MONTH
            out[w] = entry
    return out


async def test_a_31_day_window_is_tested_against_its_reference(settings, store):
    windows = await month_windows(settings, store, "monthly", reference=True)
    for entry in windows.values():
        assert entry["source"] == "stored" and entry["baseline"] == "reference"
        psi = {r["check"]: r for r in entry["features"]["amount"]}["psi"]
        assert psi["status"] == "ok" and psi["n_current"] == PER_WINDOW


async def test_a_seasonal_baseline_for_a_31_day_window_falls_back_with_its_reason(settings, store):
    model = "monthly-seasonal"
    await store.put_detector_config(model, DetectorConfig.model_validate({"baseline": {"kind": "seasonal"}}))
    windows = await month_windows(settings, store, model, reference=False)
    # The first window has no past at all; the next ones are compared with the window
    # before them (the trailing baseline reaches back one window), and say why.
    assert (windows[0]["source"], windows[0]["reason"]) == ("none", "no_baseline")
    for w in (1, 2):
        entry = windows[w]
        assert entry["baseline"] == "trailing", entry
        assert "longer than the seasonal period" in entry["baseline_note"]
        psi = {r["check"]: r for r in entry["features"]["amount"]}["psi"]
        assert psi["status"] in ("ok", "drift") and psi["n_baseline"] == PER_WINDOW
