"""Day windows in a model's time zone, end to end (SDK -> Kafka -> aggregator -> Redis ->
detector -> REST API) across a spring-forward day (23 h) and a fall-back day (25 h): each
record lands in its local day, the stored windows carry their true start and length, the
seasonal baseline of a Monday is the Monday a week before even when DST changed in
between, and the API shows local start times. An unknown zone is refused naming the field."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import httpx

from detectors.config import DetectorConfig
from sdk import AsyncClient
from service.api.app import create_app
from service.profiles.keys import parse_member
from tests.conftest import wait_for
from tests.roles import running, window_counts

MODEL = "berlin-days"
BERLIN = ZoneInfo("Europe/Berlin")
HOUR = 3_600
# Local days, each with its own record count (so a baseline's size tells which day it is):
# two Sundays and Mondays around the spring change (Sunday 2024-03-31 is 23 h long) and two
# around the autumn one (Sunday 2024-10-27 is 25 h long).
DAYS = {dt.date(2024, 3, 24): 31, dt.date(2024, 3, 25): 32, dt.date(2024, 3, 31): 33,
        dt.date(2024, 4, 1): 34, dt.date(2024, 10, 20): 35, dt.date(2024, 10, 21): 36,
        dt.date(2024, 10, 27): 37, dt.date(2024, 10, 28): 38}
DRIFTED = {dt.date(2024, 10, 27), dt.date(2024, 10, 28)}  # the 25 h day and the day after it
WEEK_BEFORE = {dt.date(2024, 3, 31): dt.date(2024, 3, 24), dt.date(2024, 4, 1): dt.date(2024, 3, 25),
               dt.date(2024, 10, 27): dt.date(2024, 10, 20), dt.date(2024, 10, 28): dt.date(2024, 10, 21)}


def midnight(day: dt.date) -> int:
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=BERLIN).timestamp())


def offset(day: dt.date) -> str:
    """Berlin's UTC offset at the day's local midnight (summer time from 2024-03-31 02:00 to
    2024-10-27 03:00)."""
    return "+02:00" if dt.date(2024, 3, 31) < day < dt.date(2024, 10, 28) else "+01:00"


def event_times(day: dt.date, n: int) -> list[float]:
    """``n`` times spread over the local day, from its first second to its last (times a UTC
    day window would put in the day before or after)."""
    lo, hi = midnight(day), midnight(day + dt.timedelta(days=1))
    return [lo + (hi - lo - 1) * j / (n - 1) for j in range(n)]


async def test_local_days_across_dst_changes(settings, store):
    s = settings.model_copy(update={"backfill_idle_seconds": 0.5})
    app = create_app(s, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        for zone, seconds in (("Mars/Olympus", 86_400), ("localtime", 86_400), ("Europe/Berlin", 7_200)):
            body = {"window_seconds": seconds, "window_timezone": zone}
            resp = await http.put(f"/v1/models/{MODEL}", json=body)
            assert (resp.status_code, resp.json()["field"]) == (422, "window_timezone"), resp.text
        resp = await http.put(f"/v1/models/{MODEL}", json={
            "window_seconds": 86_400, "window_timezone": "Europe/Berlin", "backfill": True})
        assert resp.status_code == 200, resp.text
        resp = await http.patch(f"/v1/models/{MODEL}", json={"window_timezone": "Europe/Nowhere"})
        assert (resp.status_code, resp.json()["field"]) == (422, "window_timezone"), resp.text
        assert (await http.get(f"/v1/models/{MODEL}")).json()["config"]["window_timezone"] == "Europe/Berlin"
    await store.put_detector_config(MODEL, DetectorConfig.model_validate(
        {"baseline": {"kind": "seasonal", "seasonal_weeks": 1}}))

    async with running(s, store, "aggregator", "detector"):
        async with AsyncClient(s.kafka_bootstrap, s.predictions_topic, linger_ms=10) as client:
            for day, n in DAYS.items():
                shift = 100.0 if day in DRIFTED else 0.0
                for j, t in enumerate(event_times(day, n)):
                    client.log_prediction(MODEL, {"amount": float(j % 7) + shift}, prediction_id=f"{day}-{j}",
                                          event_time=t, model_version="1")
            await client.flush()

        async def all_through_the_detector() -> bool:  # evaluated, or skipped for want of a baseline
            counted = await store.model_status(MODEL)
            return sum(int(v) for k, v in counted.items() if k == "evaluated" or k.startswith("skipped:")) \
                == len(DAYS)
        await wait_for(all_through_the_detector, timeout=90)
        # The days with no day a week before them have no baseline; the others have theirs.
        counted = await store.model_status(MODEL)
        assert (counted["evaluated"], counted["skipped:no_baseline"]) == ("4", "4"), counted

    assert await window_counts(store, MODEL) == {midnight(d): n for d, n in DAYS.items()}
    lengths = {parse_member(m)[1]: parse_member(m)[0] for m in await store.window_members(MODEL, 0, "+inf")}
    assert lengths[midnight(dt.date(2024, 3, 31))] == 23 * HOUR
    assert lengths[midnight(dt.date(2024, 10, 27))] == 25 * HOUR
    assert {n for start, n in lengths.items() if start not in (midnight(dt.date(2024, 3, 31)),
                                                               midnight(dt.date(2024, 10, 27)))} == {86_400}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        for day, before in WEEK_BEFORE.items():
            resp = await http.get(f"/v1/models/{MODEL}/drift", params={"window": midnight(day)})
            assert resp.status_code == 200, resp.text
            [entry] = resp.json()["windows"]
            assert entry["window_start_local"] == f"{day.isoformat()}T00:00:00{offset(day)}"
            assert entry["window_end"] == midnight(day + dt.timedelta(days=1))
            # The same local weekday a week before, found across the DST change (the Mondays
            # after a change are 167 h and 169 h after the Monday before, not 168 h).
            assert (entry["source"], entry["baseline"]) == ("stored", "seasonal"), entry
            psi = {r["check"]: r for r in entry["features"]["amount"]}["psi"]
            assert (psi["n_current"], psi["n_baseline"]) == (DAYS[day], DAYS[before])
        resp = await http.get(f"/v1/models/{MODEL}/profiles", params={"granularity": "window"})
        assert [w["window_start_local"] for w in resp.json()["windows"]] == [
            f"{d.isoformat()}T00:00:00{offset(d)}" for d in DAYS]
        # Alerts name the local start of their first window too (the pipeline's own
        # configuration: the window that pages is the model's).
        alerts = (await http.get("/v1/alerts", params={"model": MODEL})).json()
        assert alerts, "the drifted days raise an alert"
        for a in alerts:
            start = a["window_start"]
            day = dt.datetime.fromtimestamp(start, BERLIN).date()
            assert a["window_start_local"] == f"{day.isoformat()}T00:00:00{offset(day)}", a
            assert day in DRIFTED and a["window_end"] == midnight(day + dt.timedelta(days=1))  # 25 h or 24 h
        status = (await http.get(f"/v1/models/{MODEL}/status")).json()
        assert status["last_evaluated"]["window_start_local"] == "2024-10-28T00:00:00+01:00"


HOURLY = "berlin-hours"


def local(day: dt.date, hour: int) -> int:
    return int(dt.datetime(day.year, day.month, day.day, hour, tzinfo=BERLIN).timestamp())


async def test_hourly_windows_in_a_zone_roll_up_into_local_days_and_compare_local_hours(settings, store):
    # Hourly windows of a Berlin model: every hour of Sunday 2024-03-31 (23 of them) and
    # 09:00 and 10:00 on the Mondays before and after it. The Monday 10:00 CEST window's
    # seasonal baseline is 10:00 CET a week before (167 h back; 168 h is 09:00 CET); the
    # 23-hour Sunday rolls up into one local day of 23 h.
    s = settings.model_copy(update={"backfill_idle_seconds": 0.5})
    sunday, mondays = dt.date(2024, 3, 31), (dt.date(2024, 3, 25), dt.date(2024, 4, 1))
    per_hour = {local(mondays[0], 9): 41, local(mondays[0], 10): 42}
    per_hour |= {local(sunday, 0) + h * HOUR: 5 + h for h in range(23)}
    per_hour |= {local(mondays[1], 9): 43, local(mondays[1], 10): 44}
    app = create_app(s, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        resp = await http.put(f"/v1/models/{HOURLY}", json={
            "window_seconds": 3_600, "window_timezone": "Europe/Berlin", "backfill": True})
        assert resp.status_code == 200, resp.text
    await store.put_detector_config(HOURLY, DetectorConfig.model_validate(
        {"baseline": {"kind": "seasonal", "seasonal_weeks": 1}}))
    async with running(s, store, "aggregator", "detector"):
        async with AsyncClient(s.kafka_bootstrap, s.predictions_topic, linger_ms=10) as client:
            for start, n in per_hour.items():
                for j in range(n):
                    client.log_prediction(HOURLY, {"amount": float(j % 5)}, prediction_id=f"{start}-{j}",
                                          event_time=start + j * (HOUR - 1) / (n - 1), model_version="1")
            await client.flush()

        async def done() -> bool:
            counted = await store.model_status(HOURLY)
            through = sum(int(v) for k, v in counted.items() if k == "evaluated" or k.startswith("skipped:"))
            rolled = await store.window_members(HOURLY, 0, "+inf", 86_400)
            return through == len(per_hour) and len(rolled) >= 1
        await wait_for(done, timeout=90)

    assert await window_counts(store, HOURLY) == per_hour
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        resp = await http.get(f"/v1/models/{HOURLY}/drift", params={"window": local(mondays[1], 10)})
        [entry] = resp.json()["windows"]
        assert entry["window_start_local"] == "2024-04-01T10:00:00+02:00"
        assert (entry["source"], entry["baseline"]) == ("stored", "seasonal"), entry
        psi = {r["check"]: r for r in entry["features"]["amount"]}["psi"]
        assert (psi["n_current"], psi["n_baseline"]) == (44, 42)  # 10:00 CET, not 09:00 (41)
        resp = await http.get(f"/v1/models/{HOURLY}/profiles", params={"granularity": "day"})
        days = {w["window_start_local"]: w for w in resp.json()["windows"]}
        sun = days["2024-03-31T00:00:00+01:00"]
        assert sun["window_end"] - sun["window_start"] == 23 * HOUR
        assert sun["count"] == sum(5 + h for h in range(23))
