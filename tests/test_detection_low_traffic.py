"""Low traffic on the product defaults: a model with 5 records a day in daily windows,
whose feature shifts by 1 sd on day 200 of a year, is alerted within 14 days, with no
alert before the shift. Each window holds 5 values, fewer than any test needs (30): it
is tested together with the windows before it, and its results say so.

The windows are written to a real Redis as the aggregator writes them and go through
the real detector worker (baseline resolution, tests, FDR gate, persistence) with the
default settings and no reference. Registration warns about such windows (API and SDK)."""

from __future__ import annotations

import asyncio
import warnings

import httpx
import numpy as np
import pytest

from sdk import register_model
from sdk.record import PredictionRecord
from service.detection.detector import Detector
from service.settings import Settings
from sketches.profile import WindowProfile
from tests.conftest import put_window

MODEL = "low-traffic"
DAY = 86_400
T0 = 1_700_006_400 // DAY * DAY
SHIFT_DAY = 200
PER_DAY = 5


async def put_day(store, day: int, rng: np.random.Generator) -> str:
    start = T0 + day * DAY
    mean = 1.0 if day >= SHIFT_DAY else 0.0
    p = WindowProfile(MODEL, start, DAY)
    p.add_records([PredictionRecord(MODEL, "1", f"{day}-{i}", start + 3_600.0 * (i + 1),
                                    {"x": float(rng.normal(mean, 1)), "c": str(rng.choice(["a", "b"]))})
                   for i in range(PER_DAY)])
    return await put_window(store, p)


async def test_five_records_a_day_alerts_within_14_days_of_a_one_sd_shift(settings, store):
    defaults = Settings(kafka_bootstrap=settings.kafka_bootstrap, redis_url=settings.redis_url)
    detector = Detector(defaults, store)
    rng = np.random.default_rng(200)
    fired: list[tuple[int, str, str]] = []
    notes: dict[int, str | None] = {}
    for day in range(SHIFT_DAY + 14):
        member = await put_day(store, day, rng)
        for a in await detector.evaluate(MODEL, member):
            if a.state == "firing" and a.fired_window_start == T0 + day * DAY:
                fired.append((day, a.feature, a.check))
        results = await store.results(MODEL, member)
        if results:
            notes[day] = results[0]["pool_note"]
    assert [f for f in fired if f[0] < SHIFT_DAY] == []  # no false alert in 200 days
    after = [f for f in fired if f[0] >= SHIFT_DAY]
    assert after and after[0][1] == "x", fired  # the shifted feature (mean shift or PSI)
    print(f"first alert on day {after[0][0]} ({after[0][0] - SHIFT_DAY} days after the shift)")
    assert after[0][0] - SHIFT_DAY <= 14
    assert notes[SHIFT_DAY] == "tested together with the 5 preceding window(s): 30 records (a test needs 30)"
    results = {(r["feature"], r["check"]): r for r in await store.results(MODEL, member)}
    assert results["x", "psi"]["n_current"] == 30 and results["x", "psi"]["baseline"] == "trailing"
    assert results["", "volume"]["n_current"] == PER_DAY  # the window's own count


async def test_registration_warns_when_windows_hold_fewer_records_than_a_test_needs(api_url, store):
    with pytest.warns(UserWarning, match=r"expected 5 records per window \(5 a day, 86400 s windows\), "
                                         r"fewer than the 30 a test needs: each window is tested together "
                                         r"with the windows before it \(up to 14\) until it holds 30, so a "
                                         r"change is seen over 6 windows; a window of at least 518400 s"):
        answer = await asyncio.to_thread(register_model, api_url, "daily", window_seconds=DAY,
                                         expected_records_per_day=5)
    assert answer["config"]["expected_records_per_day"] == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a weekly window holds 35: no warning
        answer = await asyncio.to_thread(register_model, api_url, "daily", window_seconds=7 * DAY)
    assert answer["warnings"] == []
    async with httpx.AsyncClient(base_url=api_url) as http:
        put = await http.put("/v1/models/sparse", json={"window_seconds": DAY, "expected_records_per_day": 1})
        [text] = put.json()["warnings"]
        assert "even pooled with 14 preceding windows: its tests will answer insufficient_data" in text
        assert text.endswith("a window of at least 2592000 s holds them")
        patched = await http.patch("/v1/models/sparse", json={"window_seconds": 31 * DAY})
        assert patched.json()["warnings"] == []
        assert (await http.get("/v1/models/daily")).json()["warnings"] == []
        post = await http.post("/v1/models", json={"model_id": "rare", "window_seconds": 300,
                                                   "expected_records_per_day": 100})
        assert post.status_code == 201 and "0.347 records per window" in post.json()["warnings"][0]
        bad = await http.put("/v1/models/rare", json={"expected_records_per_day": -1})
        assert bad.status_code == 422 and bad.json()["field"] == "expected_records_per_day"
