"""Low traffic on the product defaults: a model with 5 records a day in daily windows,
whose feature shifts by 1 sd on day 200 of a year, is alerted within 14 days, with no
alert before the shift. Each window holds 5 values, fewer than any test needs (30): it
is tested together with the windows before it, and its results say so.

The windows are written to a real Redis as the aggregator writes them and go through
the real detector worker (baseline resolution, tests, FDR gate, persistence) with the
default settings and no reference."""

from __future__ import annotations

import numpy as np

from sdk.record import PredictionRecord
from service.detection.detector import Detector
from service.profiles.store import index_key, profile_key, window_member
from service.settings import Settings
from sketches.profile import WindowProfile

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
    member = window_member(DAY, start, "1")
    await store.r.set(profile_key(MODEL, member), p.to_bytes())
    await store.r.zadd(index_key(MODEL), {member: start})
    await store.r.sadd("fw:models", MODEL)
    return member


async def test_five_records_a_day_alerts_within_14_days_of_a_one_sd_shift(settings, store):
    defaults = Settings(kafka_bootstrap=settings.kafka_bootstrap, redis_url=settings.redis_url)
    detector = Detector(defaults, store)
    rng = np.random.default_rng(200)
    fired: list[tuple[int, str, str]] = []
    notes: dict[int, str | None] = {}
    for day in range(SHIFT_DAY + 14):
        member = await put_day(store, day, rng)
        for a in await detector.evaluate(MODEL, member):
            if a["state"] == "firing" and a["fired_window_start"] == T0 + day * DAY:
                fired.append((day, a["feature"], a["check"]))
        results = await store.results(MODEL, member)
        if results:
            notes[day] = results[0]["pool_note"]
    assert [f for f in fired if f[0] < SHIFT_DAY] == []  # no false alert in 200 days
    after = [f for f in fired if f[0] >= SHIFT_DAY]
    assert after and after[0][1:] == ("x", "psi"), fired
    print(f"first alert on day {after[0][0]} ({after[0][0] - SHIFT_DAY} days after the shift)")
    assert after[0][0] - SHIFT_DAY <= 14
    assert notes[SHIFT_DAY] == "tested together with the 5 preceding window(s): 30 records (a test needs 30)"
    results = {(r["feature"], r["check"]): r for r in await store.results(MODEL, member)}
    assert results["x", "psi"]["n_current"] == 30 and results["x", "psi"]["baseline"] == "trailing"
    assert results["", "volume"]["n_current"] == PER_DAY  # the window's own count
