"""Learned floors: a feature's tests clear max(configured floor, what the feature normally
moves window to window), learned from the reference's rows split into the model's windows.

A restless feature (a daily rhythm the pooled reference averages away) does not page at
its usual peak; a stable feature beside it still alerts on a real change; the learned
floors are stored, read back in ``GET /v1/models/{id}`` and ``/status``, and each result
says which floor applied and why."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
import pytest_asyncio

from detectors.config import service_defaults
from detectors.policy.learned import LearnedFloors, learn_floors
from detectors.suite import evaluate_window
from sdk.record import PredictionRecord
from service.api.app import create_app
from service.detection.detector import Detector
from service.profiles.reference import (
    FloorLearning,
    ReferenceColumns,
    build_reference,
    learned_reference_floors,
)
from service.registry import ModelConfig
from sketches.bins import bin_templates
from sketches.profile import WindowProfile
from tests.conftest import put_window

MODEL = "demand"
HOUR = 3_600
T0 = 1_700_006_400  # 00:00 UTC
PEAK = 6  # sin(2 pi h / 24) is largest at 06:00


def rhythm(hour: float) -> float:
    """The restless feature's mean at an hour of the day (sd 1 around it)."""
    return 0.6 * np.sin(2 * np.pi * hour / 24)


def reference_rows(rng: np.random.Generator, days: int = 2, per_hour: int = 150) -> list[dict]:
    out = []
    for h in range(days * 24):
        for t in np.sort(rng.uniform(T0 + h * HOUR, T0 + (h + 1) * HOUR, per_hour)):
            out.append({"t": float(t), "restless": float(rng.normal(rhythm(h % 24), 1)),
                        "stable": float(rng.normal(0, 1))})
    return out


def live(rng: np.random.Generator, hour: int, n: int, stable_shift: float = 0.0) -> list[dict]:
    return [{"restless": float(rng.normal(rhythm(hour), 1)), "stable": float(rng.normal(stable_shift, 1))}
            for _ in range(n)]


@pytest_asyncio.fixture
async def http(settings, store):
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client


async def put_hour(store, start: int, features: list[dict]) -> str:
    p = WindowProfile(MODEL, start, HOUR, bins=bin_templates((await store.reference(MODEL)).edge_set()))
    p.add_records([PredictionRecord(MODEL, "1", str(i), start + 1.0, f) for i, f in enumerate(features)])
    return await put_window(store, p)


def test_the_rule_subtracts_the_noise_of_shuffled_windows():
    rng = np.random.default_rng(0)
    rows = reference_rows(rng)
    columns = ReferenceColumns(time="t")
    ref = build_reference(MODEL, rows, time_column="t")
    learned = learned_reference_floors(MODEL, rows, ref, service_defaults(), HOUR, 0, columns)
    assert learned.chunks == 48 and learned.note is None
    restless, stable = learned.get("restless", "psi"), learned.get("stable", "psi")
    # The floor covers the rhythm's peak as a large live window sees it (PSI 0.32 at 06:00),
    # errs high by the noise of 150-row chunks, and stays far above the configured 0.2.
    peak = WindowProfile(MODEL, 0, HOUR, bins=bin_templates(ref.edge_set()))
    peak.add_records([PredictionRecord(MODEL, "1", str(i), 1.0, f)
                      for i, f in enumerate(live(rng, PEAK, 20_000))])
    [peak_psi] = [r.effect_size for r in evaluate_window(peak, ref)
                  if (r.feature, r.check) == ("restless", "psi")]
    assert 0.25 < peak_psi < restless.floor < 2 * peak_psi
    assert restless.movement > restless.floor > restless.noise > 0
    # The stable feature's hours are random draws of one law: the time chunks move no more
    # than shuffled ones (sampling noise of 150 values against 7,200), so nothing is learned.
    assert stable.floor < 0.05 and stable.noise > 0.02
    again = learned_reference_floors(MODEL, rows, ref, service_defaults(), HOUR, 0, columns)
    assert again == learned  # seeded: the same rows learn the same floors
    assert LearnedFloors.from_dict(learned.to_dict()) == learned
    few = learned_reference_floors(MODEL, rows[:150 * 3], ref, service_defaults(), HOUR, 0, columns,
                                   FloorLearning(min_windows=8))
    assert few.floors == {} and few.note == ("the reference splits into 3 windows of 3600 s; 8 are "
                                             "needed to learn floors")
    with pytest.raises(ValueError):
        learn_floors([], [], HOUR, quantile=0.0)


async def test_a_restless_feature_does_not_page_at_its_peak_and_a_stable_one_still_alerts(
        settings, store, http):
    rng = np.random.default_rng(1)
    reg = {"model_id": MODEL, "window_seconds": HOUR, "persistence": {"k": 1, "m": 1}}
    assert (await http.post("/v1/models", json=reg)).status_code == 201
    rows = reference_rows(rng)
    up = await http.post(f"/v1/models/{MODEL}/reference", json={"rows": rows, "time_column": "t"})
    assert up.status_code == 200, up.text
    assert "t" not in up.json()["features"]  # the time is no feature
    assert up.json()["learned_floors"]["floors"]["restless"]["psi"]["floor"] > 0.3

    view = (await http.get(f"/v1/models/{MODEL}")).json()["floors"]
    assert view["configured"]["psi"] == settings.psi_floor
    assert view["learned"]["windows"] == 48 and view["learned"]["window_seconds"] == HOUR
    learned_psi = view["learned"]["floors"]["restless"]["psi"]["floor"]
    assert learned_psi > 0.3 and view["learned"]["floors"]["stable"]["psi"]["floor"] < 0.05
    assert (await http.get(f"/v1/models/{MODEL}/status")).json()["floors"] == view

    # 06:00 a day later: the restless feature at its daily peak (a PSI of 0.3 against the
    # pooled reference, above the configured floor), the stable one shifted by 1 sd.
    start = T0 + 3 * 24 * HOUR + PEAK * HOUR
    member = await put_hour(store, start, live(rng, PEAK, 2000, stable_shift=1.0))
    alerts = await Detector(settings, store).evaluate(MODEL, member)
    # the stable feature alerts on its distribution and its mean (both alert by default)
    assert sorted((a.feature, a.check) for a in alerts) == [("stable", "mean_shift"), ("stable", "psi")]
    results = {(r["feature"], r["check"]): r for r in await store.results(MODEL, member)}
    restless, stable = results["restless", "psi"], results["stable", "psi"]
    assert restless["effect_size"] > 0.25 and restless["status"] == "ok"
    assert restless["floor"] == pytest.approx(learned_psi) and restless["floor_source"] == "learned"
    assert restless["floor_reason"].startswith("learned: psi moves ")
    assert f"> configured {settings.psi_floor:g}" in restless["floor_reason"]
    # the stable feature's floor: the larger of the configured one and its small learned one
    stable_learned = view["learned"]["floors"]["stable"]["psi"]["floor"]
    assert stable["status"] == "drift"
    assert stable["floor"] == pytest.approx(max(settings.psi_floor, stable_learned))

    # The same reference without its times: nothing learned, and the peak pages (the old rule).
    plain = [{k: v for k, v in r.items() if k != "t"} for r in rows]
    assert (await http.post(f"/v1/models/{MODEL}/reference", json={"rows": plain})).status_code == 200
    assert (await http.get(f"/v1/models/{MODEL}")).json()["floors"]["learned"] is None
    member = await put_hour(store, start + 24 * HOUR, live(rng, PEAK, 2000))
    alerts = await Detector(settings, store).evaluate(MODEL, member)
    fired = {a.feature for a in alerts if a.fired_window_start == start + 24 * HOUR}
    assert fired == {"restless"}  # (the stable feature's alerts of the day before are still open)
    assert {(r["feature"], r["check"]): r for r in await store.results(MODEL, member)}[
        "restless", "psi"]["floor_source"] == "configured"


async def test_learned_floors_apply_only_to_their_window_length_and_bad_times_are_refused(
        settings, store, http):
    rng = np.random.default_rng(2)
    reg = {"model_id": MODEL, "window_seconds": HOUR}
    assert (await http.post("/v1/models", json=reg)).status_code == 201
    rows = reference_rows(rng, days=1)
    bad = [*rows[:5], {**rows[5], "t": "noon"}]
    huge = [*rows[:5], {**rows[5], "t": 1e300}]
    resp = await http.post(f"/v1/models/{MODEL}/reference", json={"rows": bad, "time_column": "t"})
    assert resp.status_code == 422 and resp.json()["field"] == "rows[5].t"
    resp = await http.post(f"/v1/models/{MODEL}/reference", json={"rows": huge, "time_column": "t"})
    assert resp.status_code == 422
    assert resp.json()["message"] == "the event time must be before the year 10000"
    for column in ("time_column", "score_column", "label_column", "truth_column"):
        resp = await http.post(f"/v1/models/{MODEL}/reference", json={"rows": rows, column: ""})
        assert resp.status_code == 422 and resp.json()["field"] == column, resp.text
    assert await store.reference(MODEL) is None  # nothing stored
    assert (await http.post(f"/v1/models/{MODEL}/reference",
                            json={"rows": rows, "time_column": "t"})).status_code == 200
    await store.put_model_config(MODEL, ModelConfig(window_seconds=2 * HOUR))
    start = T0 + 2 * 24 * HOUR + PEAK * HOUR
    p = WindowProfile(MODEL, start, 2 * HOUR)
    p.add_records([PredictionRecord(MODEL, "1", str(i), start + 1.0, f)
                   for i, f in enumerate(live(rng, PEAK, 500))])
    member = await put_window(store, p)
    await Detector(settings, store).evaluate(MODEL, member)
    restless = {r["check"]: r for r in await store.results(MODEL, member) if r["feature"] == "restless"}
    assert restless["psi"]["floor"] == settings.psi_floor and restless["psi"]["floor_source"] == "configured"
