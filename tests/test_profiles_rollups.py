"""Rollups and retention on a real Redis: 5-minute windows merge exactly into hours and
days once complete and applied; reads fall back to rollups when windows expire."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import httpx
import numpy as np

from sdk.record import PredictionRecord
from service.api.app import create_app
from service.profiles.keys import parse_member, pending_key, profile_key, window_index_key, window_member
from service.profiles.rollups import DAY, HOUR, Rollups
from service.registry import ModelConfig
from sketches.profile import WindowProfile

T0 = 1_700_006_400 - 1_700_006_400 % DAY
W = 300
MODEL = "m"


async def put_windows(store, n: int, seed: int = 0) -> dict[int, WindowProfile]:
    """n consecutive closed windows of a few records each (two versions in window 0)."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(n):
        start = T0 + i * W
        for version in ("1", "2") if i == 0 else ("1",):
            p = WindowProfile(MODEL, start, W)
            p.add_records([PredictionRecord(MODEL, version, f"{i}-{j}", start + j, {
                "x": float(rng.normal()), "c": str(rng.choice(["a", "b"]))}) for j in range(1 + i % 3)])
            member = window_member(W, start, version)
            await store.r.set(profile_key(MODEL, member), p.to_bytes())
            await store.r.zadd(window_index_key(MODEL), {member: start})
            out[(i, version)] = p
    await store.r.sadd("{fw}:models", MODEL)
    return out


async def test_hours_and_days_merge_their_windows_exactly(settings, store):
    windows = await put_windows(store, 25 * 12 + 1)  # 25 h and one window of the next hour
    rollups = Rollups(settings, store)
    await store.r.zadd(pending_key(MODEL), {window_member(W, T0 + 2 * HOUR + W, "1"): T0 + 2 * HOUR + W})
    await rollups.advance(MODEL, W)
    assert await store.window_members(MODEL, 0, "+inf", HOUR) == [  # blocked by the pending window
        window_member(HOUR, T0, "1"), window_member(HOUR, T0, "2"), window_member(HOUR, T0 + HOUR, "1")]
    await store.r.delete(pending_key(MODEL))
    while await rollups.advance(MODEL, W):
        pass
    hours = await store.window_members(MODEL, 0, "+inf", HOUR)
    assert len(hours) == 25 + 1  # version 2 has one hour
    assert await store.window_members(MODEL, 0, "+inf", DAY) == [
        window_member(DAY, T0, "1"), window_member(DAY, T0, "2")]
    [day] = await store.window_profiles(MODEL, [window_member(DAY, T0, "1")], DAY)
    expected = sum(p.count for (i, v), p in windows.items() if v == "1" and i < 24 * 12)
    assert (day.window_start, day.window_seconds, day.count) == (T0, DAY, expected)
    xs = [p.features["x"].numeric for (i, v), p in windows.items() if v == "1" and i < 24 * 12]
    assert day.features["x"].numeric.min == min(x.min for x in xs)
    assert day.features["x"].numeric.max == max(x.max for x in xs)
    c = sum((p.features["c"].categorical.frequencies().get("a", 0)
             for (i, v), p in windows.items() if v == "1" and i < 24 * 12))
    assert day.features["c"].categorical.frequencies()["a"] == c
    assert 0 < await store.r.ttl(profile_key(MODEL, window_member(DAY, T0, "1"))) <= 731 * DAY
    # Idempotent: advancing again writes nothing new.
    assert await rollups.advance(MODEL, W) == 0


async def test_reads_fall_back_to_rollups_and_the_api_names_the_granularity(settings, store):
    windows = await put_windows(store, 3 * 12 + 1)
    while await Rollups(settings, store).advance(MODEL, W):
        pass
    # The first hour's windows expire: a baseline read of that hour gets its rollup.
    for m in await store.window_members(MODEL, T0, f"({T0 + HOUR}"):
        await store.r.delete(profile_key(MODEL, m))
    found = await store.profiles_in(MODEL, [(T0, T0 + HOUR)], (HOUR, DAY))
    assert [(p.window_start, p.window_seconds) for p in found] == [(T0, HOUR)] * 2  # two versions
    assert sum(p.count for p in found) == sum(p.count for (i, _v), p in windows.items() if i < 12)
    assert await store.window_members(MODEL, T0, f"({T0 + HOUR}") == []  # expired left the index
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                                 base_url="http://t") as http:
        body = (await http.get(f"/v1/models/{MODEL}/profiles", params={"limit": 10})).json()
        assert body["granularity"] == "hour" and [w["window_start"] for w in body["windows"]] == [
            T0, T0 + HOUR, T0 + 2 * HOUR]
        fine = (await http.get(f"/v1/models/{MODEL}/profiles",
                               params={"granularity": "window", "from": T0 + HOUR, "limit": 5})).json()
        assert fine["granularity"] == "window" and len(fine["windows"]) == 5
        assert fine["windows"][0]["window_end"] - fine["windows"][0]["window_start"] == W
        bad = await http.get(f"/v1/models/{MODEL}/profiles", params={"granularity": "week"})
        assert bad.status_code == 422 and bad.json()["field"] == "granularity"


async def test_a_model_in_a_time_zone_rolls_up_into_its_local_days(settings, store):
    # Five-minute windows of a Berlin model over Sunday 2024-10-27 (25 h: the clocks go
    # back at 03:00) and the hours around it: the day rollup is that local day, 300
    # windows, keyed by its true length; a seasonal read of a local hour finds its hour
    # rollup once the windows expired.
    tz = ZoneInfo("Europe/Berlin")
    model = "berlin-5min"
    grid = ModelConfig(window_seconds=W, window_timezone="Europe/Berlin").window_grid
    day0 = int(dt.datetime(2024, 10, 27, tzinfo=tz).timestamp())  # 22:00 UTC the day before
    day1 = int(dt.datetime(2024, 10, 28, tzinfo=tz).timestamp())
    assert day1 - day0 == 25 * HOUR
    counts = {}
    for start in range(day0 - 2 * HOUR, day1 + HOUR + W, W):  # and a window after the next hour
        p = WindowProfile(model, start, W)
        n = 1 + (start // W) % 3
        p.add_records([PredictionRecord(model, "1", f"{start}-{j}", start + j, {"x": 1.0}) for j in range(n)])
        member = window_member(W, start, "1")
        await store.r.set(profile_key(model, member), p.to_bytes())
        await store.r.zadd(window_index_key(model), {member: start})
        counts[start] = n
    while await Rollups(settings, store).advance(model, grid):
        pass
    days = await store.window_members(model, 0, "+inf", DAY)
    assert window_member(25 * HOUR, day0, "1") in days  # the local day, 25 h long
    [day] = await store.window_profiles(model, [window_member(25 * HOUR, day0, "1")], DAY)
    assert (day.window_start, day.window_seconds) == (day0, 25 * HOUR)
    assert day.count == sum(n for s, n in counts.items() if day0 <= s < day1)
    hours = [parse_member(m)[1] for m in await store.window_members(model, day0, f"({day1}", HOUR)]
    assert hours == list(range(day0, day1, HOUR))  # 25 hours from local midnight
    # The windows of 02:00-03:00 CET (the repeated hour's second pass) expire; a read of that
    # local hour gets its rollup.
    second = int(dt.datetime(2024, 10, 27, 2, fold=1, tzinfo=tz).timestamp())
    assert second - day0 == 3 * HOUR
    for m in await store.window_members(model, second, f"({second + HOUR}"):
        await store.r.delete(profile_key(model, m))
    found = await store.profiles_in(model, [(second, second + HOUR)], (HOUR, DAY), grid)
    assert [(p.window_start, p.window_seconds) for p in found] == [(second, HOUR)]
    assert found[0].count == sum(n for s, n in counts.items() if second <= s < second + HOUR)
