"""Multiclass and regression label joins on a real broker and Redis: the cohorts kept in
Redis give the metrics sklearn computes on the raw joined data, and a degradation pages
through the same FDR gate and alert policy as the binary checks.

Tolerances: counts, accuracy and confusion matrices are exact; macro-F1 1e-12 (the same
arithmetic in another order); MAE, RMSE, MAPE and bias relative 1e-9 (sums kept by
Redis ``HINCRBYFLOAT`` in long double, printed to 17 digits after every addition, and
relabels subtracting what they added); error quantiles within the error histogram's
relative accuracy (1 %) of numpy's inverted-CDF quantile.
"""

from __future__ import annotations

import math
import uuid

import httpx
import numpy as np
from sklearn import metrics as skm

from sdk import AsyncClient
from service.alerting.store import AlertStore
from service.api.app import create_app
from service.cohorts import CohortStore, MulticlassCodec, RegressionCodec, slice_id
from service.registry import ModelConfig, PerformanceConfig
from service.settings import Settings
from tests.conftest import wait_for
from tests.roles import running

T0 = 1_700_006_400
W = 300
WINDOWS = 5
BAD = (3, 4)
PER_WINDOW = 400


def joiner_settings(settings: Settings) -> Settings:
    tag = uuid.uuid4().hex[:8]
    return settings.model_copy(update={"labels_topic": f"labels-{tag}", "joiner_group": f"join-{tag}",
                                       "performance_eval_interval_seconds": 0.2,
                                       # the consumer group forms in ~3 s instead of ~7 s
                                       "kafka_heartbeat_interval_ms": 200, "kafka_session_timeout_ms": 2_000})


def config(task: str, **perf) -> ModelConfig:
    return ModelConfig(tier=1, slice_features=["device"], persistence={"k": 2, "m": 3, "resolve_after": 3},
                       performance=PerformanceConfig(task=task, label_horizon_seconds=3_600,
                                                     slice_min_labeled=50, **perf))


async def judged(store, model: str) -> None:
    cohorts = CohortStore(store.r)

    async def done() -> bool:
        return len(await cohorts.evaluations(model)) == WINDOWS

    await wait_for(done, timeout=60)


async def performance(settings: Settings, store, model: str, **params) -> dict:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                                 base_url="http://t") as http:
        r = await http.get(f"/v1/models/{model}/performance", params=params)
    assert r.status_code == 200, r.text
    return r.json()


async def test_multiclass_cohorts_match_sklearn_and_an_accuracy_drop_pages(settings, store):
    settings = joiner_settings(settings)
    model, classes = "intent", ["billing", "cancel", "other"]
    await store.put_model_config(model, config("multiclass"))
    rng = np.random.default_rng(21)
    rows = {}  # pid -> window, device, predicted class, top probability or None, true class
    async with running(settings, store, "joiner"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic, linger_ms=10,
                               labels_topic=settings.labels_topic) as client:
            for w in range(WINDOWS):
                y = rng.integers(0, 3, PER_WINDOW)
                signal = 2.5 if w not in BAD else 0.0  # bad windows: probabilities unrelated to y
                logits = rng.normal(0, 1, (PER_WINDOW, 3)) + signal * np.eye(3)[y]
                probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
                for i in range(PER_WINDOW):
                    pid, device = f"{w}-{i}", ("mobile", "desktop")[i % 2]
                    top = int(np.argmax(probs[i]))
                    if i % 3:  # class probabilities: the joiner takes the arg-max class
                        p = {c: float(v) for c, v in zip(classes, probs[i], strict=True)}
                        client.log_prediction(model, {"device": device}, prediction_id=pid,
                                              class_probabilities=p, event_time=T0 + w * W + i * 0.5)
                        rows[pid] = (w, device, classes[top], float(probs[i].max()), classes[y[i]])
                    else:  # only the predicted label
                        client.log_prediction(model, {"device": device}, prediction_id=pid,
                                              predicted_label=classes[top], event_time=T0 + w * W + i * 0.5)
                        rows[pid] = (w, device, classes[top], None, classes[y[i]])
            await client.flush()
            for pid, (_w, _d, _p, _c, truth) in rows.items():
                if pid.endswith("-7"):  # a wrong label first; the right one wins
                    client.log_label(model, pid, "other" if truth != "other" else "billing", T0 + 1_700)
                client.log_label(model, pid, truth, T0 + 1_800)
            client.log_label(model, "0-1", 2.5, T0 + 1_800)  # not a class
            await client.flush()
        await judged(store, model)

    cohorts, codec = CohortStore(store.r), MulticlassCodec()
    stats = await cohorts.stats(model)
    assert (stats["joined"], stats["relabeled"], stats["invalid"]) == (WINDOWS * PER_WINDOW, WINDOWS, 1)
    for w in range(WINDOWS):
        for device in (None, "mobile", "desktop"):
            sel = [r for r in rows.values() if r[0] == w and device in (None, r[1])]
            y_true, y_pred = [r[4] for r in sel], [r[2] for r in sel]
            sid = None if device is None else slice_id("device", device)
            c = await cohorts.load(model, T0 + w * W, codec, sid)
            assert c.predictions == c.labeled == len(sel)
            assert c.metrics.accuracy().value == skm.accuracy_score(y_true, y_pred)
            assert math.isclose(c.metrics.f1_macro().value,
                                skm.f1_score(y_true, y_pred, average="macro", zero_division=0), abs_tol=1e-12)
            expected = skm.confusion_matrix(y_true, y_pred, labels=classes)
            assert (c.metrics.confusion_matrix(classes) == expected).all()
            tops = [r[3] for r in sel if r[3] is not None]
            assert c.confidence_n == len(tops) and math.isclose(c.confidence_sum, sum(tops), rel_tol=1e-12)

    alerts = await AlertStore(store.r).alerts(model, 0, 100)
    # Accuracy > 0.8 -> < 0.45: overwhelming, so it pages at its first bad window (no k-of-m wait).
    assert {(a.feature, a.check, a.window_start, a.fired_window_start) for a in alerts} >= {
        ("__performance__", "accuracy_drop", T0 + BAD[0] * W, T0 + BAD[0] * W)}
    assert {a.check for a in alerts} <= {"accuracy_drop", "accuracy_drop@device:mobile",
                                            "accuracy_drop@device:desktop"}
    body = await performance(settings, store, model)
    assert body["task"] == "multiclass" and body["threshold"] is None
    good, bad = body["cohorts"][0], body["cohorts"][BAD[1]]
    assert good["realized"]["accuracy"] > 0.8 > 0.45 > bad["realized"]["accuracy"]
    assert set(good["realized"]["per_class_f1"]) == set(classes)
    # Label-free: the mean top-class probability of the predictions that carried probabilities.
    tops = [r[3] for r in rows.values() if r[0] == 0 and r[3] is not None]
    assert math.isclose(good["estimated"]["accuracy"], sum(tops) / len(tops), rel_tol=1e-12)
    assert bad["evaluation"]["results"][0]["check"] == "accuracy_drop"
    assert bad["evaluation"]["results"][0]["status"] == "drift"
    sliced = await performance(settings, store, model, slice="device:mobile")
    assert [c["labeled"] for c in sliced["cohorts"]] == [PER_WINDOW // 2] * WINDOWS


async def test_regression_cohorts_match_sklearn_and_an_mae_increase_pages(settings, store):
    settings = joiner_settings(settings)
    model = "eta"
    await store.put_model_config(model, config("regression"))
    rng = np.random.default_rng(22)
    rows = {}  # pid -> window, device, prediction, target
    async with running(settings, store, "joiner"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic, linger_ms=10,
                               labels_topic=settings.labels_topic) as client:
            for w in range(WINDOWS):
                y = np.round(rng.lognormal(3.0, 0.5, PER_WINDOW), 1)
                y[:10] = 0.0  # targets 0: out of MAPE
                noise = rng.normal(0, 1.0 if w not in BAD else 3.0, PER_WINDOW)
                pred = y + noise
                pred[10:30] = y[10:30]  # exact predictions: |e| = 0
                for i in range(PER_WINDOW):
                    pid, device = f"{w}-{i}", ("mobile", "desktop")[i % 2]
                    client.log_prediction(model, {"device": device}, prediction_id=pid, score=float(pred[i]),
                                          event_time=T0 + w * W + i * 0.5)
                    rows[pid] = (w, device, float(pred[i]), float(y[i]))
            await client.flush()
            for pid, (_w, _d, _p, target) in rows.items():
                if pid.endswith("-5"):  # a wrong label first (a large error); the right one wins
                    client.log_label(model, pid, target + 250.0, T0 + 1_700)
                client.log_label(model, pid, target, T0 + 1_800)
            client.log_label(model, "0-1", "fast", T0 + 1_800)  # not a number
            client.log_label(model, "0-2", True, T0 + 1_800)  # nor is a bool
            await client.flush()
        await judged(store, model)

    cohorts, codec = CohortStore(store.r), RegressionCodec()
    stats = await cohorts.stats(model)
    assert (stats["joined"], stats["relabeled"], stats["invalid"]) == (WINDOWS * PER_WINDOW, WINDOWS, 2)
    for w in range(WINDOWS):
        for device in (None, "desktop"):
            sel = [r for r in rows.values() if r[0] == w and device in (None, r[1])]
            y, p = np.array([r[3] for r in sel]), np.array([r[2] for r in sel])
            sid = None if device is None else slice_id("device", device)
            c = await cohorts.load(model, T0 + w * W, codec, sid)
            assert c.predictions == c.labeled == len(sel)
            m = c.metrics
            assert math.isclose(m.mae().value, skm.mean_absolute_error(y, p), rel_tol=1e-9)
            assert math.isclose(m.rmse().value, math.sqrt(skm.mean_squared_error(y, p)), rel_tol=1e-9)
            assert math.isclose(m.bias().value, float(np.mean(p - y)), rel_tol=1e-9, abs_tol=1e-12)
            nz = y != 0
            assert m.mape().n == nz.sum()
            mape = skm.mean_absolute_percentage_error(y[nz], p[nz])
            assert math.isclose(m.mape().value, mape, rel_tol=1e-9)
            abs_e = np.abs(p - y)
            for q, got in m.error_quantiles().items():
                exact = float(np.quantile(abs_e, q, method="inverted_cdf"))
                assert abs(got.value - exact) <= got.error_bound + 1e-12
                assert got.error_bound <= 0.0102 * got.value

    alerts = await AlertStore(store.r).alerts(model, 0, 100)
    # MAE < 1 -> > 2: overwhelming, so it pages at its first bad window (no k-of-m wait).
    assert ("__performance__", "mae_increase", T0 + BAD[0] * W, T0 + BAD[0] * W) in {
        (a.feature, a.check, a.window_start, a.fired_window_start) for a in alerts}
    body = await performance(settings, store, model)
    assert body["task"] == "regression" and body["cohorts"][0]["estimated"] == {}
    good, bad = body["cohorts"][0]["realized"], body["cohorts"][BAD[1]]["realized"]
    assert good["mae"] < 1.0 < 2.0 < bad["mae"]
    assert {"rmse", "mape", "bias", "abs_error_p50", "abs_error_p90", "abs_error_p99"} <= set(good)
    result = body["cohorts"][BAD[1]]["evaluation"]["results"][0]
    assert (result["check"], result["status"]) == ("mae_increase", "drift")
    # The floor defaults to 10 % of the baseline MAE: windows 0-2 (window 3, judged drift, is
    # left out of the baseline of the windows after it).
    assert body["cohorts"][BAD[1]]["evaluation"]["baseline_left_out"] == 1
    base = [abs(r[2] - r[3]) for r in rows.values() if r[0] < BAD[0]]
    assert math.isclose(result["floor"], 0.1 * sum(base) / len(base), rel_tol=1e-9)


def test_a_binary_label_adds_what_a_one_example_cohort_holds():
    """The joiner's per-label binary counters are ``BinaryCohort.add``'s, to the last bit."""
    from detectors.performance.binary import BinaryCohort
    from service.cohorts import delta, example_counters, to_counters

    rng = np.random.default_rng(23)
    scores = [*rng.random(1_000).tolist(), *(rng.random(100) * 1e-9).tolist(), 0.0, 0.5, 1.0, 1 - 1e-17]
    for s in scores:
        for y in (0, 1):
            c = BinaryCohort(0.5)
            c.add([s], [y])
            assert example_counters(s, y, 0.5) == to_counters(c)
    assert delta(0.3, 1, 1, 0.5) == {}  # relabel to the same label: nothing changes
    assert delta(0.7, 0, 1, 0.5)["tp"] == -1 and delta(0.7, 0, 1, 0.5)["fp"] == 1
