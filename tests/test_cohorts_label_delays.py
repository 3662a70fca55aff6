"""Delayed labels on the product defaults (real broker and Redis, event times in the past):
a registration with a ``performance`` section joins labels or is refused; a binary model
whose accuracy drops by 20 points, labels arriving 3 days after their predictions, pages
within the cohort's maturity plus one window; a cohort judged ``insufficient_data`` is
judged again when the rest of its labels arrive; labels later than the horizon are
counted per model in the API."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from sdk import AsyncClient
from service.alerting.store import AlertStore
from service.api.app import create_app
from service.cohorts import CohortStore
from service.registry import ModelConfig
from tests.conftest import wait_for
from tests.roles import running
from tests.test_cohorts_joiner import joiner_settings

DAY = 86_400
T0 = 19_675 * DAY  # a UTC day, in the past
DELAY = 3 * DAY
PER_DAY = 600
CHANGE = 8  # days 0-7 healthy (the default baseline is the trailing 7 days), then the drop
DAYS = CHANGE + 2 + 3  # cohorts CHANGE and CHANGE + 1 get all their labels
MODEL, SMALL = "churn", "churn-small"


def api(settings, store) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                             base_url="http://t")


@pytest.mark.parametrize("method", ["post", "put"])
async def test_a_performance_section_joins_labels_or_is_refused(settings, store, method):
    async with api(settings, store) as http:
        body = {"tier": 2, "performance": {}, **({"model_id": "m"} if method == "post" else {})}
        url = "/v1/models" if method == "post" else "/v1/models/m"
        refused = await getattr(http, method)(url, json=body)
        assert refused.status_code == 422 and refused.json()["field"] == "performance"
        assert "tier-1 models only" in refused.json()["message"]
        assert (await store.model_configs(["m"]))["m"] is None
        ok = await getattr(http, method)(url, json={**body, "tier": 1})
        assert ok.status_code == (201 if method == "post" else 200)
        cfg = ModelConfig.model_validate(ok.json()["config"])
        assert cfg.joins_labels and cfg.performance.label_horizon_seconds == 30 * DAY


def day_traffic(rng: np.random.Generator, day: int) -> tuple[np.ndarray, np.ndarray]:
    """Calibrated scores and labels; from CHANGE on a share of the labels is flipped so
    that accuracy at the 0.5 threshold falls by 20 points (flip share f = 0.2 / (2a - 1))."""
    s = 1 / (1 + np.exp(-rng.normal(0.0, 2.5, size=PER_DAY)))
    y = rng.random(PER_DAY) < s
    if day >= CHANGE:
        a = np.mean(np.maximum(s, 1 - s))  # expected accuracy of calibrated scores
        y ^= rng.random(PER_DAY) < 0.2 / (2 * a - 1)
    return s, y


async def test_accuracy_drop_with_labels_three_days_late_pages_within_maturity_plus_one_window(
        settings, store):
    settings = joiner_settings(settings)
    rng = np.random.default_rng(20)
    async with api(settings, store) as http:
        for m in (MODEL, SMALL):  # every performance setting at its default
            resp = await http.post("/v1/models", json={"model_id": m, "tier": 1, "window_seconds": DAY,
                                                       "performance": {}})
            assert resp.status_code == 201, resp.text
    labels: dict[int, list[tuple[str, bool, float]]] = {}
    async with running(settings, store, "joiner"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic, linger_ms=10,
                               labels_topic=settings.labels_topic) as client:
            # The small model: a baseline cohort of 40 labeled predictions, then a cohort of
            # 30 predictions with 28 labels now and 2 later.
            base = [(f"b{i}", bool(i % 2), T0 - DAY + 600 + i) for i in range(40)]
            small = [(f"s{i}", bool(i % 2), T0 + 600 + i) for i in range(30)]
            for pid, _y, t in base + small:
                client.log_prediction(SMALL, {"x": 1.0}, prediction_id=pid, score=0.5, event_time=t)
            for d in range(DAYS):
                s, y = day_traffic(rng, d)
                times = T0 + d * DAY + np.sort(rng.uniform(0, DAY, PER_DAY))
                for i in range(PER_DAY):
                    pid = f"d{d}-{i}"
                    client.log_prediction(MODEL, {"x": 1.0}, prediction_id=pid, score=float(s[i]),
                                          event_time=float(times[i]))
                labels[d] = [(f"d{d}-{i}", bool(y[i]), float(times[i]) + DELAY) for i in range(PER_DAY)]
                for pid, yy, t in labels.pop(d - 3, []):  # each label 3 days after its prediction
                    client.log_label(MODEL, pid, yy, event_time=t)
                if d == 0:
                    for pid, yy, t in base:
                        client.log_label(SMALL, pid, yy, event_time=t + 3_600)
                if d == 1:
                    for pid, yy, t in small[:28]:
                        client.log_label(SMALL, pid, yy, event_time=t + 3_600)
                await client.flush()
            cohorts = CohortStore(store.r)

            async def small_judged() -> bool:
                return T0 in await cohorts.evaluations(SMALL)

            await wait_for(small_judged, timeout=60)
            first = (await cohorts.evaluations(SMALL))[T0]
            assert first["labeled"] == 28
            assert {r["status"] for r in first["results"]} == {"insufficient_data"}
            for pid, yy, t in small[28:]:
                client.log_label(SMALL, pid, yy, event_time=t + 3_600)
            # Labels far beyond the 30-day horizon: counted late, per model.
            for pid, yy, t in labels[DAYS - 1][:3]:
                client.log_label(MODEL, pid, yy, event_time=t + 40 * DAY)
            await client.flush()

        judged_days = [T0 + d * DAY for d in range(CHANGE + 2)]

        async def judged() -> bool:
            ev = await cohorts.evaluations(MODEL)
            again = (await cohorts.evaluations(SMALL))[T0]["labeled"] == 30
            late = (await cohorts.stats(MODEL))["late"] == 3
            return again and late and all(d in ev for d in judged_days)

        await wait_for(judged, timeout=90)

    # The stream ended with cohort CHANGE + 1's labels: one window after cohort CHANGE matured.
    alerts = [a for a in await AlertStore(store.r).alerts(MODEL, 0, 100)
              if a.feature == "__performance__"]
    assert alerts, "the accuracy drop did not page"
    assert {a.window_start for a in alerts} == {T0 + CHANGE * DAY}
    assert all(a.fired_window_start <= T0 + (CHANGE + 1) * DAY and a.state == "firing"
               for a in alerts)
    async with api(settings, store) as http:
        body = (await http.get(f"/v1/models/{MODEL}/performance")).json()
        small_body = (await http.get(f"/v1/models/{SMALL}/performance")).json()
    by_day = {(c["window_start"] - T0) // DAY: c for c in body["cohorts"]}
    before, after = by_day[CHANGE - 1]["realized"]["accuracy"], by_day[CHANGE]["realized"]["accuracy"]
    assert 0.14 < before - after < 0.26, (before, after)
    assert by_day[CHANGE]["evaluation"]["results"][0]["status"] == "drift"
    assert body["labels"]["late"] == 3  # visible per model, not only as a metric
    # Re-judged once its last two labels arrived: log loss needs 30 labeled, so it is tested now.
    cohort = small_body["cohorts"][1]
    statuses = {r["check"]: r["status"] for r in cohort["evaluation"]["results"]}
    assert cohort["evaluation"]["labeled"] == 30 and statuses["log_loss_increase"] != "insufficient_data"


async def test_a_labelled_reference_is_the_baseline_from_the_first_cohort(settings, store):
    """A model broken from its first live day: the trailing baseline would be the broken
    days themselves (never an alert); the labelled reference (validation scores with their
    true labels, uploaded with the reference) catches it at the first cohort."""
    settings = joiner_settings(settings)
    rng = np.random.default_rng(21)
    model = "ranker"
    s = 1 / (1 + np.exp(-rng.normal(0.0, 2.5, size=2_000)))
    validation = [{"x": 1.0, "score": float(v), "y": bool(rng.random() < v)} for v in s]
    async with api(settings, store) as http:
        assert (await http.post("/v1/models", json={"model_id": "plain", "tier": 2})).status_code == 201
        refused = await http.post("/v1/models/plain/reference", json={
            "rows": validation[:10], "score_column": "score", "truth_column": "y"})
        assert refused.status_code == 422 and refused.json()["field"] == "truth_column"
        resp = await http.post("/v1/models", json={"model_id": model, "tier": 1, "window_seconds": DAY,
                                                   "performance": {}})
        assert resp.status_code == 201
        bad = await http.post(f"/v1/models/{model}/reference", json={
            "rows": [validation[0], {**validation[1], "y": "maybe"}], "score_column": "score",
            "truth_column": "y"})
        assert bad.status_code == 422 and bad.json()["field"] == "rows[1].y"
        ok = await http.post(f"/v1/models/{model}/reference", json={
            "rows": validation, "score_column": "score", "truth_column": "y"})
        assert ok.status_code == 200 and "y" not in ok.json()["features"]  # the truth is no feature
    async with running(settings, store, "joiner"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic, linger_ms=10,
                               labels_topic=settings.labels_topic) as client:
            for d in range(2):  # the scores tell nothing about the labels from day 0 on
                scores = 1 / (1 + np.exp(-rng.normal(0.0, 2.5, size=PER_DAY)))
                for i, v in enumerate(scores):
                    client.log_prediction(model, {"x": 1.0}, prediction_id=f"{d}-{i}", score=float(v),
                                          event_time=T0 + d * DAY + i * 100)
                for i in range(scores.size):
                    client.log_label(model, f"{d}-{i}", bool(rng.random() < scores.mean()),
                                     event_time=T0 + d * DAY + i * 100 + 3_600)
                await client.flush()
            cohorts = CohortStore(store.r)

            async def judged() -> bool:
                return len(await cohorts.evaluations(model)) == 2

            await wait_for(judged, timeout=60)
    first = (await cohorts.evaluations(model))[T0]
    assert first["baseline"] == "reference" and first["baseline_labeled"] == len(validation)
    assert {r["check"]: r["status"] for r in first["results"]}["auc_drop"] == "drift"
    alerts = await AlertStore(store.r).alerts(model, 0, 100)
    assert alerts and {a.window_start for a in alerts} == {T0}
