"""Delayed labels on a real broker and Redis: predictions joined to late labels per
cohort, counted outcomes, maturity before judgment, and performance alerts."""

from __future__ import annotations

import uuid

import httpx
import numpy as np

from sdk import AsyncClient
from service.alerting.store import AlertStore
from service.api.app import create_app
from service.cohorts import CohortStore, Prediction
from service.cohorts.joiner import Joiner
from service.registry import ModelConfig, PerformanceConfig
from service.settings import Settings
from tests.conftest import wait_for
from tests.roles import running

T0 = 1_700_006_400  # a 300 s window boundary
W = 300
MODEL = "fraud"


def joiner_settings(settings: Settings) -> Settings:
    """Labels topic and joiner group of the test's own; frequent evaluation; a consumer
    group that forms in ~3 s instead of ~7 s."""
    tag = uuid.uuid4().hex[:8]
    return settings.model_copy(update={"labels_topic": f"labels-{tag}", "joiner_group": f"join-{tag}",
                                       "performance_eval_interval_seconds": 0.2,
                                       "kafka_heartbeat_interval_ms": 200, "kafka_session_timeout_ms": 2_000})


def config(**perf) -> ModelConfig:
    return ModelConfig(tier=1, persistence={"k": 2, "m": 3, "resolve_after": 3},
                       performance=PerformanceConfig(label_horizon_seconds=3_600, **perf))


def scores_and_labels(rng: np.random.Generator, n: int, informative: bool) -> tuple[np.ndarray, np.ndarray]:
    """Calibrated scores (y ~ Bernoulli(score)), or scores unrelated to the labels."""
    s = 1 / (1 + np.exp(-rng.normal(-1.0, 1.5, size=n)))
    return s, rng.random(n) < (s if informative else s.mean())


async def test_late_labels_join_their_predictions_and_a_performance_drop_pages(settings, store):
    settings = joiner_settings(settings)
    await store.put_model_config(MODEL, config())
    rng = np.random.default_rng(3)
    windows = 6  # windows 4 and 5: the model stops separating the classes
    truth = {}
    async with running(settings, store, "joiner"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic, linger_ms=10,
                               labels_topic=settings.labels_topic) as client:
            for w in range(windows):
                s, y = scores_and_labels(rng, 1_500, informative=w < 4)
                for i in range(s.size):
                    pid = f"w{w}-{i}"
                    truth[pid] = bool(y[i])
                    client.log_prediction(MODEL, {"x": 1.0}, prediction_id=pid, score=float(s[i]),
                                          event_time=T0 + w * W + i * 0.1)
            await client.flush()
            # Labels arrive later (after all predictions), plus the odd ones.
            for pid, y in truth.items():
                client.log_label(MODEL, pid, y, event_time=T0 + windows * W + 10)
            client.log_label(MODEL, "w0-0", truth["w0-0"], event_time=T0 + windows * W + 20)  # duplicate
            client.log_label(MODEL, "w0-1", not truth["w0-1"], event_time=T0 + windows * W + 20)  # relabel
            client.log_label(MODEL, "never-predicted", True, event_time=T0 + windows * W)
            client.log_label(MODEL, "w0-2", "maybe", event_time=T0 + windows * W)  # not binary
            client.log_label(MODEL, "w0-3", True, event_time=T0 + 10 * 3_600)  # past the horizon
            await client.flush()

        cohorts = CohortStore(store.r)

        async def all_evaluated() -> bool:
            return len(await cohorts.evaluations(MODEL)) == windows

        await wait_for(all_evaluated, timeout=90)
        stats = await cohorts.stats(MODEL)
    assert {k: stats[k] for k in ("joined", "duplicate", "relabeled", "unknown", "late", "invalid")} == {
        "joined": len(truth), "duplicate": 1, "relabeled": 1, "unknown": 1, "late": 1, "invalid": 1}
    alerts = await AlertStore(store.r).alerts(MODEL, 0, 100)
    # The AUC falls to 0.5 with 1,500 labels a cohort: overwhelming evidence (p far below the
    # gate's level, effect >= 3 x the floor), so it pages at its first window, no k-of-m wait.
    assert {(a.feature, a.check, a.window_start, a.fired_window_start) for a in alerts} == {
        ("__performance__", check, T0 + 4 * W, T0 + 4 * W) for check in ("auc_drop", "log_loss_increase")}
    assert len({a.incident_id for a in alerts}) == 1  # one incident: the model's performance
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, store)),
                                 base_url="http://t") as http:
        body = (await http.get(f"/v1/models/{MODEL}/performance")).json()
    assert [c["window_start"] for c in body["cohorts"]] == [T0 + w * W for w in range(windows)]
    good, bad = body["cohorts"][1], body["cohorts"][5]
    assert good["maturity"]["mature"] and good["predictions"] == good["labeled"] == 1_500
    assert good["realized"]["roc_auc"] > 0.8 and abs(bad["realized"]["roc_auc"] - 0.5) < 0.06
    assert good["evaluation"]["results"][0]["status"] == "ok"
    assert bad["evaluation"]["results"][0]["check"] == "auc_drop"
    assert bad["evaluation"]["results"][0]["status"] == "drift"
    # The label-free estimate (calibrated scores) tracks the informative cohort's accuracy.
    assert abs(good["evaluation"]["estimate_error"]["accuracy"]) < 0.05


async def test_an_immature_cohort_is_not_judged_however_alarming(settings, store):
    cfg = config(expected_label_fraction=0.9)
    cfg = cfg.model_copy(update={"persistence": cfg.persistence.model_copy(update={"k": 1, "m": 1})})
    await store.put_model_config(MODEL, cfg)
    rng = np.random.default_rng(5)
    cohorts = CohortStore(store.r)
    joiner = Joiner(settings, store)
    labels = {}
    for w in range(2):  # a good baseline window, then a window whose first labels are all wrong
        s, y = scores_and_labels(rng, 1_000, informative=True)
        preds = [Prediction(f"{w}-{i}", float(s[i]), T0 + w * W, T0 + w * W + i * 0.1) for i in range(s.size)]
        assert await cohorts.put_predictions(MODEL, preds, 7_200, 86_400) == s.size
        assert await cohorts.put_predictions(MODEL, preds[:10], 7_200, 86_400) == 0  # redelivered
        labels[w] = [(p.prediction_id, bool(v)) for p, v in zip(preds, y, strict=True)]
    for pid, y in labels[0]:
        await cohorts.join(MODEL, pid, int(y), T0 + 2 * W, 0.5, 3_600)
    # 40 % of window 1's labels, every one of them wrong: the AUC so far is alarming.
    early = labels[1][:400]
    for pid, y in early:
        assert await cohorts.join(MODEL, pid, int(not y), T0 + 2 * W, 0.5, 3_600) == "joined"
    await joiner.judge.evaluate_model(MODEL, cfg, await joiner.watermark(MODEL))
    assert (await cohorts.cohort(MODEL, T0 + W, 0.5)).roc_auc().value < 0.3  # alarming
    assert set(await cohorts.evaluations(MODEL)) == {T0}  # window 1 is immature: not judged
    assert await AlertStore(store.r).alerts(MODEL, 0, 10) == []
    # The rest arrive (and the early ones are corrected: last label wins): mature, healthy.
    for pid, y in labels[1]:
        await cohorts.join(MODEL, pid, int(y), T0 + 3 * W, 0.5, 3_600)
    await joiner.judge.evaluate_model(MODEL, cfg, await joiner.watermark(MODEL))
    evaluation = (await cohorts.evaluations(MODEL))[T0 + W]
    assert evaluation["maturity"]["labeled_fraction"] == 1.0 and evaluation["realized"]["roc_auc"] > 0.8
    assert [r["status"] for r in evaluation["results"]] == ["ok", "ok"]
    assert await AlertStore(store.r).alerts(MODEL, 0, 10) == []
    assert (await cohorts.stats(MODEL))["relabeled"] == 400


async def test_a_drops_own_cohorts_are_not_the_baseline_of_the_cohorts_after_it(settings, store):
    """Without a labelled reference, a cohort judged ``drift`` is left out of the trailing
    baseline of the cohorts after it: the second cohort of a drop is compared with the
    performance before the drop, not with a baseline holding the drop's first cohort."""
    settings = joiner_settings(settings)
    await store.put_model_config(MODEL, config())
    rng = np.random.default_rng(5)
    windows, n = 4, 800  # windows 2 and 3: the model stops separating the classes
    truth = {}
    async with running(settings, store, "joiner"):
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic, linger_ms=10,
                               labels_topic=settings.labels_topic) as client:
            for w in range(windows):
                s, y = scores_and_labels(rng, n, informative=w < 2)
                for i in range(n):
                    truth[f"w{w}-{i}"] = bool(y[i])
                    client.log_prediction(MODEL, {"x": 1.0}, prediction_id=f"w{w}-{i}", score=float(s[i]),
                                          event_time=T0 + w * W + i * 0.1)
            await client.flush()
            for w in range(windows):  # each window's labels after the window before it is judged
                for i in range(n):
                    client.log_label(MODEL, f"w{w}-{i}", truth[f"w{w}-{i}"], event_time=T0 + windows * W)
                await client.flush()
        cohorts = CohortStore(store.r)

        async def all_evaluated() -> bool:
            done = await cohorts.evaluations(MODEL)
            return len(done) == windows and not any(  # window 0 has no baseline: insufficient
                r["status"] == "insufficient_data" for b, e in done.items() if b > T0 for r in e["results"])

        await wait_for(all_evaluated, timeout=90)
        done = await cohorts.evaluations(MODEL)
    first, second = done[T0 + 2 * W], done[T0 + 3 * W]
    assert first["results"][0]["status"] == second["results"][0]["status"] == "drift"
    assert first["baseline_left_out"] == 0 and first["baseline_labeled"] == 2 * n
    # the first bad cohort left out: the baseline is the two good ones only
    assert second["baseline_left_out"] == 1 and second["baseline_labeled"] == 2 * n
