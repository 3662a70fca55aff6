"""Drift API and detector worker on a real Redis: results per feature, per-model and
per-feature configuration, seasonal baselines from stored windows."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np

from detectors.policy.persistence import PersistenceConfig
from sdk.record import PredictionRecord
from service.api.app import create_app
from service.detection.detector import Detector
from service.profiles.keys import WINDOWS_STREAM
from service.profiles.reference import build_reference
from service.registry import ModelConfig
from sketches.profile import WindowProfile
from tests.conftest import put_window as store_window
from tests.conftest import wait_for
from tests.metric_samples import sample

T0 = 1_700_006_400
MODEL = "fraud"


def rows(rng: np.random.Generator, n: int, shift: float = 0.0) -> list[dict]:
    return [{"amount": float(rng.lognormal(3 + shift, 1)), "country": str(rng.choice(["de", "fr"]))}
            for _ in range(n)]


async def alert_on_first_breach(store) -> None:
    """Persistence 1 of 1: a single breaching window fires."""
    await store.put_model_config(MODEL, ModelConfig(persistence=PersistenceConfig(k=1, m=1)))


async def put_window(store, start: int, features: list[dict], length: int = 300) -> str:
    p = WindowProfile(MODEL, start, length)
    p.add_records([PredictionRecord(MODEL, "1", str(i), start + 1.0, f) for i, f in enumerate(features)])
    return await store_window(store, p)


async def test_drift_endpoint_serves_every_feature_computed_then_stored(settings, store):
    rng = np.random.default_rng(1)
    await alert_on_first_breach(store)
    await store.put_reference(MODEL, build_reference(MODEL, rows(rng, 2000)))
    member = await put_window(store, T0, rows(rng, 1000, shift=1.0))
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        body = (await http.get(f"/v1/models/{MODEL}/drift", params={"window": T0})).json()
        [w] = body["windows"]
        assert (w["source"], w["baseline"], w["version"]) == ("computed", "reference", "1")
        assert set(w["features"]) == {"amount", "country", ""}
        amount = {r["check"]: r for r in w["features"]["amount"]}
        assert {"psi", "ks", "js", "wasserstein", "mean_shift", "null_rate"} <= set(amount)
        assert amount["psi"]["status"] == "drift" and amount["psi"]["floor"] == settings.psi_floor == 0.02
        assert {r["check"]: r["status"] for r in w["features"]["country"]}["chi2"] == "ok"
        alerts = await Detector(settings, store).evaluate(MODEL, member)
        # a lognormal's log-location shift (every value times e) moves its distribution and
        # mean; its spread is tested on the log scale, where it is unchanged, so variance_shift
        # does not alert; the unchanged country does not alert
        assert sorted((a.feature, a.check) for a in alerts) == [("amount", "mean_shift"), ("amount", "psi")]
        assert "log scale" in amount["variance_shift"]["reason"]
        latest = (await http.get(f"/v1/models/{MODEL}/drift")).json()["windows"][0]
        assert latest["source"] == "stored" and latest["features"]["amount"] == w["features"]["amount"]
        missing = await http.get(f"/v1/models/{MODEL}/drift", params={"window": T0 + 300})
        assert missing.status_code == 404 and missing.json()["field"] == "window"


async def test_per_model_and_per_feature_configuration_through_the_api(settings, store):
    rng = np.random.default_rng(2)
    await store.put_reference(MODEL, build_reference(MODEL, rows(rng, 2000)))
    member = await put_window(store, T0, rows(rng, 1000, shift=1.0))
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        bad = await http.put(f"/v1/models/{MODEL}/detector-config", json={"alerting": ["nope"]})
        assert bad.status_code == 422 and bad.json()["field"] == "alerting"
        bad = await http.put(f"/v1/models/{MODEL}/detector-config", json={"floors": {"ks": -1}})
        assert bad.status_code == 422 and bad.json()["field"] == "floors"
        for weights in ({"psi": 0}, {"nope": 1.0}, {"psi": 1e9}):
            bad = await http.put(f"/v1/models/{MODEL}/detector-config", json={"fdr_weights": weights})
            assert bad.status_code == 422 and bad.json()["field"] == "fdr_weights"
        resp = await http.put(f"/v1/models/{MODEL}/detector-config",
                              json={"alpha": 0.001, "alerting": ["numeric:ks"], "floors": {"ks": 0.05}})
        assert resp.status_code == 200
        assert resp.json()["effective"]["alpha"] == 0.001
        resp = await http.put(f"/v1/models/{MODEL}/detector-config/features/amount",
                              json={"checks": ["ks", "null_rate"], "floors": {"ks": 0.9}})
        cfg = resp.json()
        assert cfg["config"]["features"]["amount"]["floors"] == {"ks": 0.9}
        assert cfg["config"]["alpha"] == 0.001  # the model-level settings are kept
        amount = (await http.get(f"/v1/models/{MODEL}/drift")).json()["windows"][0]["features"]["amount"]
        assert [r["check"] for r in amount] == ["null_rate", "ks"]
        assert amount[1]["floor"] == 0.9 and amount[1]["status"] == "ok"  # D ~ 0.38 < 0.9
        assert await Detector(settings, store).evaluate(MODEL, member) == []
        assert (await http.delete(f"/v1/models/{MODEL}/detector-config/features/amount")).status_code == 200
        assert (await http.delete(f"/v1/models/{MODEL}/detector-config/features/amount")).status_code == 404
        assert (await http.get("/v1/models/nope/drift")).status_code == 404


async def test_seasonal_baseline_and_volume_from_stored_windows(settings, store):
    rng = np.random.default_rng(3)
    await alert_on_first_breach(store)
    week = 7 * 86_400
    for j in (1, 2, 3):  # the same hour of the week, three past weeks
        for k in range(12):
            await put_window(store, T0 - j * week + k * 300, rows(rng, 200))
    member = await put_window(store, T0, rows(rng, 20))  # a volume drop, same distribution
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        await http.put(f"/v1/models/{MODEL}/detector-config", json={"baseline": {"kind": "seasonal"}})
        [w] = (await http.get(f"/v1/models/{MODEL}/drift")).json()["windows"]
    assert w["baseline"] == "seasonal"
    [volume] = w["features"][""]
    assert volume["status"] == "drift" and volume["n_baseline"] == 36 * 200
    assert volume["effect_size"] == -0.9
    alerts = await Detector(settings, store).evaluate(MODEL, member)
    assert [(a.feature, a.check) for a in alerts] == [("", "volume")]


async def test_a_failed_release_is_logged_and_counted(settings, store, caplog):
    """Releasing a window the policy failed on may itself fail (here: a member that does
    not parse); the failure is logged with the model and window and counted, not
    swallowed, and the worker goes on."""
    before = sample("fleetwatch_detector_release_failures_total")
    with caplog.at_level("ERROR", logger="fleetwatch.detector"):
        await Detector(settings, store).release(MODEL, "not-a-window")
    assert sample("fleetwatch_detector_release_failures_total") == before + 1
    [record] = [r for r in caplog.records if r.name == "fleetwatch.detector"]
    assert "model=fraud" in record.getMessage() and "window=not-a-window" in record.getMessage()
    assert record.exc_info is not None


async def test_auto_keeps_the_reference_and_says_which_baseline_answered(settings, store):
    """A full seasonal history (four weeks of the slot) does not displace the reference: it
    holds the model's past incidents (the demo's weather fault made every window after it
    read as a null-rate drop against the weeks that held it); without a reference, auto
    compares with the same hour of past weeks."""
    rng = np.random.default_rng(4)
    week = 7 * 86_400
    for j in (1, 2, 3, 4):
        for k in range(12):
            await put_window(store, T0 - j * week + k * 300, rows(rng, 100))
    member = await put_window(store, T0, rows(rng, 200))
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http:
        [w] = (await http.get(f"/v1/models/{MODEL}/drift")).json()["windows"]
        assert w["baseline"] == "seasonal"
        assert {r["check"]: r for r in w["features"]["amount"]}["psi"]["n_baseline"] == 48 * 100
        await store.put_reference(MODEL, build_reference(MODEL, rows(rng, 2000)))
        [w] = (await http.get(f"/v1/models/{MODEL}/drift")).json()["windows"]
        assert w["baseline"] == "reference"
        await Detector(settings, store).evaluate(MODEL, member)
        view = (await http.get(f"/v1/models/{MODEL}")).json()
        assert view["baseline"] == {"configured": "auto", "last_used": "reference"}


async def test_the_worker_outlives_its_event_stream_being_deleted(settings, store):
    """Someone deletes the window-event stream (and with it the consumer group): the read
    fails with NOGROUP; the worker counts it, creates the group again and goes on, so an
    event appended afterwards is still handled (here a malformed look: dropped, acknowledged)."""
    detector = Detector(settings, store)
    stop = asyncio.Event()
    before = sample("fleetwatch_detector_read_errors_total")

    async def read_failed() -> bool:
        return sample("fleetwatch_detector_read_errors_total") > before

    async def drained() -> bool:
        return await store.r.xlen(WINDOWS_STREAM) == 0

    async def stream_made() -> bool:
        return bool(await store.r.exists(WINDOWS_STREAM))

    task = asyncio.create_task(detector.run(stop))
    try:
        await wait_for(stream_made)  # the consumer group made it
        await store.r.delete(WINDOWS_STREAM)
        await wait_for(read_failed)
        await store.r.xadd(WINDOWS_STREAM, {"model": MODEL, "member": "300:0:1", "look": "not json"})
        await wait_for(drained)  # handled, acknowledged, deleted
        assert not task.done()
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
