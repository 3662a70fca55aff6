"""The volume test before a week of history, on a real Redis through the detector's
baseline resolution: a drop on a model's second day, with only its first day stored, is
judged against the same hour yesterday (it was ``insufficient_data``: no past week), and
the result says which history answered."""

from __future__ import annotations

import httpx

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
                                   "windows of the weekday")
