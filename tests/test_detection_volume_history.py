"""The volume test before a week of history, on a real Redis through the detector's
baseline resolution: a drop on a model's second day, with only its first day stored, is
judged against the same hour yesterday (it was ``insufficient_data``: no past week), and
the result says which history answered."""

from __future__ import annotations

import json

import httpx
import numpy as np

from sdk.record import PredictionRecord
from service.api.app import create_app
from service.profiles.reference import build_reference
from sketches.profile import WindowProfile
from tests.conftest import put_window as store_window

HOUR, DAY = 3_600, 86_400
TUESDAY = 1_704_758_400  # 2024-01-09 00:00 UTC
MODEL = "volume"


async def put_hour(store, start: int, n: int) -> str:
    p = WindowProfile(MODEL, start, HOUR)
    p.add_records([PredictionRecord(MODEL, "1", f"{start}-{i}", start + 1.0, {"x": float(i % 7)})
                   for i in range(n)])
    return await store_window(store, p)


async def test_a_drop_on_day_two_is_judged_against_day_one(settings, store):
    await store.put_reference(MODEL, build_reference(MODEL, [{"x": float(i % 7)} for i in range(700)]))
    monday = TUESDAY - DAY
    for k in range(24):  # day one: 200 records an hour
        await put_hour(store, monday + k * HOUR, 200)
    for k in range(10):
        await put_hour(store, TUESDAY + k * HOUR, 200)
    await put_hour(store, TUESDAY + 10 * HOUR, 50)  # a 75 % drop
    await put_hour(store, TUESDAY + 11 * HOUR, 190)
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        async def volume(start: int) -> dict:
            [w] = (await http.get(f"/v1/models/{MODEL}/drift", params={"window": start})).json()["windows"]
            [result] = w["features"][""]
            return result

        drop = await volume(TUESDAY + 10 * HOUR)
        assert drop["status"] == "drift" and drop["effect_size"] == -0.75
        assert drop["n_baseline"] == 200
        assert "daily history (the same hour on 1 past weekday(s)" in drop["reason"]
        after = await volume(TUESDAY + 11 * HOUR)
        assert after["status"] == "ok" and "daily history" in after["reason"]
        first = await volume(monday + 10 * HOUR)  # day one: the line through its 8 hours before
        assert first["status"] == "ok" and "trailing history" in first["reason"]
        start = await volume(monday + 2 * HOUR)
        assert start["status"] == "insufficient_data"
        assert start["reason"] == ("no past week, no past weekday and fewer than 4 trailing "
                                   "windows of the weekday; no fleet control: no other model moving "
                                   "with the fleet has records in each of these windows")


FRIDAY = 1_704_412_800  # 2024-01-05 00:00 UTC


def rate(t: np.ndarray) -> np.ndarray:
    """Traffic at x0.6 at 02:00 to x1.4 at 14:00 UTC (the simulator's daily wave)."""
    return 1 + 0.4 * np.sin(2 * np.pi * ((t % DAY) / HOUR - 8) / 24)


async def test_a_reference_with_event_times_gives_day_one_its_daily_shape(settings, store):
    """A reference uploaded with a time_column over Thursday: the API shows its daily
    shape (the wave's trough and peak), and Friday 07:00, the model's first day with 73 %
    of its traffic gone after the night trough, is judged through it: a drift far below
    what the line through the trailing windows reads, with the history named. A replace
    without event times removes the shape."""
    rng = np.random.default_rng(8)
    minutes = FRIDAY - DAY + np.arange(0, DAY, 60.0)
    times = rng.choice(minutes, size=20_000, p=rate(minutes) / rate(minutes).sum())
    times += rng.uniform(0, 60, times.size)
    rows = [{"x": float(i % 7), "t": float(t)} for i, t in enumerate(times)]
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        registered = await http.post("/v1/models", json={"model_id": MODEL, "window_seconds": HOUR})
        assert registered.status_code == 201
        up = await http.post(f"/v1/models/{MODEL}/reference", json={"rows": rows, "time_column": "t"})
        assert up.status_code == 200, up.text
        shape = up.json()["daily_shape"]
        assert shape["rows"] == 20_000 and shape["missing"] is None and shape["zone"] is None
        hourly = shape["hourly"]
        assert hourly.index(min(hourly)) in (1, 2) and hourly.index(max(hourly)) in (13, 14)
        assert (await http.get(f"/v1/models/{MODEL}/reference")).json()["daily_shape"] == shape

        expected = {FRIDAY + k * HOUR: int(rng.poisson(300 * rate(FRIDAY + k * HOUR + HOUR / 2)))
                    for k in range(8)}
        for start, n in expected.items():
            await put_hour(store, start, n if start < FRIDAY + 7 * HOUR else int(n * 0.27))

        async def volume(start: int) -> dict:
            [w] = (await http.get(f"/v1/models/{MODEL}/drift", params={"window": start})).json()["windows"]
            [result] = w["features"][""]
            return result

        shaped = await volume(FRIDAY + 7 * HOUR)
        assert shaped["status"] == "drift" and "through the reference's daily shape" in shaped["reason"]
        assert shaped["p_value"] < 1e-6, shaped
        assert (await http.post(f"/v1/models/{MODEL}/reference", json={"rows": rows})).status_code == 200
        assert (await http.get(f"/v1/models/{MODEL}/reference")).json()["daily_shape"] is None
        line = await volume(FRIDAY + 7 * HOUR)
        assert "trailing history" in line["reason"] and line["p_value"] > 1e3 * shaped["p_value"], line


async def test_a_stored_shape_survives_empty_merges_and_reports_what_it_cannot_serve(settings, store):
    """An upload of no rows with replace false keeps the shape; a change of the model's
    time zone makes the reference say the shape is not used; stored values that do not
    read back (a 400-digit count, 1e308, nesting deep enough to exhaust the parser) are
    counted and read as no shape, and the reference and drift endpoints still answer."""
    from service import metrics

    minutes = FRIDAY - DAY + np.arange(0, DAY, 60.0)
    rows = [{"x": float(i % 7), "t": float(t)} for i, t in enumerate(np.repeat(minutes, 2))]
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        registered = await http.post("/v1/models", json={"model_id": MODEL, "window_seconds": HOUR})
        assert registered.status_code == 201
        assert (await http.post(f"/v1/models/{MODEL}/reference",
                                json={"rows": rows, "time_column": "t"})).status_code == 200
        merged = await http.post(f"/v1/models/{MODEL}/reference",
                                 json={"rows": [], "time_column": "t", "replace": False})
        assert merged.status_code == 200 and merged.json()["daily_shape"]["rows"] == len(rows)
        patched = await http.patch(f"/v1/models/{MODEL}", json={"window_timezone": "Asia/Tokyo"})
        assert patched.status_code == 200, patched.text
        shape = (await http.get(f"/v1/models/{MODEL}/reference")).json()["daily_shape"]
        assert "while the model's windows are in Asia/Tokyo" in shape["missing"]

        await put_hour(store, FRIDAY, 100)
        def errors() -> float:  # the API's reads and the baseline's (counted as the detector's)
            return sum(metrics.CONFIG_ERRORS.labels(role=r, kind="shape")._value.get()
                       for r in ("api", "detector"))

        for raw in ('{"counts": [1%s], "exposure": []}' % ("0" * 400), json.dumps(
                {"counts": [1e308] * 96, "exposure": [1.0] * 96}), "[" * 100_000 + "]" * 100_000):
            before = errors()
            await store.r.set(f"fw:{{{MODEL}}}:shape", raw)
            assert (await http.get(f"/v1/models/{MODEL}/reference")).json()["daily_shape"] is None
            assert (await http.get(f"/v1/models/{MODEL}/drift", params={"window": FRIDAY})).status_code == 200
            assert errors() == before + 2
