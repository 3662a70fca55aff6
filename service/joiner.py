"""The label joiner: delayed labels joined to sampled predictions, cohorts judged when mature.

Consumes the predictions and labels topics (its own consumer group; both
keyed by model id). For tier-1 models with a performance configuration
(:class:`~service.model_config.PerformanceConfig`):

- predictions kept by the model's join sampling rate (a fixed point of the
  prediction id, ``sdk.sampling.sample_point``, so a label makes the same
  decision as its prediction) are stored with their score and window, and
  counted into their window's cohort (``service.cohorts``);
- labels join their prediction: duplicates (same label again) and relabels
  (last wins) are counted, as are labels of unknown predictions, labels later
  than the horizon and labels that are not binary; undecodable label
  messages and invalid labels are dead-lettered with their reason. A label
  whose prediction has not been read yet (the labels topic ahead of the
  predictions topic, e.g. while catching up) is parked until the model's
  predictions pass the label's time, then joined or counted unknown;
- every ``performance_eval_interval_seconds`` each cohort that has *matured*
  (labeled fraction reached, or its age in event time past the horizon) is
  tested against the matured cohorts of the trailing baseline period (AUC
  drop, Hanley-McNeil; log-loss increase, CLT) and the results go through the
  same FDR gate and alert policy as drift (feature ``__performance__``). An
  immature cohort is never tested, however alarming its partial metrics.

Every step is idempotent (a prediction is stored once, a label replaces the
one it read, a cohort's evaluation is keyed by its window), so Kafka's
at-least-once delivery and concurrent replicas change nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from detectors.performance.binary import BinaryCohort
from detectors.performance.compare import auc_drop_test, log_loss_increase_test
from detectors.performance.estimate import estimate_cohort
from detectors.performance.maturity import maturity
from detectors.result import TestResult
from sdk.errors import WireError
from sdk.labels import decode_labels
from sdk.sampling import sample_point
from sdk.wire import decode_batch
from service import metrics
from service.alert_store import AlertStore
from service.alerting import AlertPolicy, WindowRef
from service.cohorts import CohortStore, Prediction
from service.fdr import FdrGate, spending
from service.kafka import dead_letter
from service.model_config import ModelConfig, PerformanceConfig
from service.settings import Settings
from service.silences import SilenceStore
from service.store import Store, window_member

log = logging.getLogger("fleetwatch.joiner")

PERFORMANCE = "__performance__"
PERFORMANCE_CHECKS = frozenset({"auc_drop", "log_loss_increase"})
CONFIG_TTL_SECONDS = 30.0


def binary_label(value: Any) -> int | None:
    """0/1 from a bool, 0/1 number or "0"/"1"/"true"/"false"; None otherwise.

    Examples
    --------
    >>> binary_label(True), binary_label(0.0), binary_label("true"), binary_label(2)
    (1, 0, 1, None)
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.lower() in ("0", "1", "true", "false"):
        return int(value.lower() in ("1", "true"))
    return None


def cohort_metrics(c: BinaryCohort) -> dict[str, Any]:
    """Realized metrics of a cohort (None with a reason when undefined)."""
    out = {}
    for name in ("roc_auc", "log_loss", "brier_score", "ece", "precision", "recall", "f1",
                 "accuracy", "average_precision"):
        m = getattr(c, name)()
        out[name] = m.value
        if m.value is None:
            out[f"{name}_reason"] = m.reason
    out["positive_rate"] = c.n_pos / c.n if c.n else None
    return out


class Joiner:
    """One label-joiner replica."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.cohorts = CohortStore(store.r)
        self.policy = AlertPolicy(AlertStore(store.r), FdrGate(store.r, spending(settings)))
        self.silences = SilenceStore(store.r)
        self._configs: dict[str, tuple[float, ModelConfig]] = {}
        self._producer: AIOKafkaProducer | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Join and evaluate until ``stop`` is set."""
        s = self.settings
        self._producer = AIOKafkaProducer(bootstrap_servers=s.kafka_bootstrap, acks="all",
                                          enable_idempotence=s.kafka_enable_idempotence)
        consumer = AIOKafkaConsumer(
            s.predictions_topic, s.labels_topic, bootstrap_servers=s.kafka_bootstrap,
            group_id=s.joiner_group, enable_auto_commit=False, auto_offset_reset="earliest",
            max_poll_records=s.max_poll_records, session_timeout_ms=s.kafka_session_timeout_ms,
            heartbeat_interval_ms=s.kafka_heartbeat_interval_ms)
        await self._producer.start()
        await consumer.start()
        last_eval = -math.inf
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=200)
                if batch:
                    for tp, messages in batch.items():
                        for msg in messages:
                            await self.handle(tp.topic, msg.key, msg.value)
                    await self._producer.flush()  # dead letters are durable before offsets move
                    await consumer.commit()
                if time.monotonic() - last_eval >= s.performance_eval_interval_seconds:
                    await self.evaluate_all(await self._predictions_read(consumer))
                    last_eval = time.monotonic()
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()
            with contextlib.suppress(Exception):
                await self._producer.stop()

    async def config(self, model_id: str) -> ModelConfig | None:
        now = time.monotonic()
        cached = self._configs.get(model_id)
        if cached is None or now - cached[0] > CONFIG_TTL_SECONDS:
            cfg = (await self.store.model_configs([model_id]))[model_id]
            self._configs[model_id] = cached = (now, cfg or ModelConfig())
        return cached[1] if cached[1].joins_labels else None

    async def handle(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        """One Kafka message of either topic."""
        if topic == self.settings.labels_topic:
            await self._labels(key, value)
        else:
            await self._predictions(value)

    async def _predictions(self, value: bytes | None) -> None:
        try:
            decoded = decode_batch(value or b"")
        except WireError:
            return  # the aggregator dead-letters undecodable prediction messages
        cfg = await self.config(decoded.model_id)
        if cfg is None or decoded.columns.score is None:
            return
        perf, cols, length = cfg.performance, decoded.columns, cfg.window_seconds
        kept = [Prediction(pid, float(s), int(t // length) * length, float(t))
                for pid, s, t in zip(cols.prediction_id, cols.score, cols.event_time, strict=True)
                if s is not None and 0.0 <= s <= 1.0 and sample_point(pid) < perf.sample_rate]
        horizon = perf.label_horizon_seconds
        new = await self.cohorts.put_predictions(decoded.model_id, kept, 2 * horizon + length,
                                                 self.settings.retention_hourly_seconds)
        metrics.JOINED_PREDICTIONS.inc(new)
        await self.unpark(decoded.model_id, perf, caught_up=False)

    async def _labels(self, key: bytes | None, value: bytes | None) -> None:
        try:
            decoded = decode_labels(value or b"")
        except WireError as exc:
            dead_letter(self._producer, self.settings.dead_letter_topic, key, value, exc.reason,
                        str(exc), 1)
            metrics.LABELS.labels(outcome="invalid").inc()
            return
        cols = decoded.columns
        for _i, err in decoded.errors:
            dead_letter(self._producer, self.settings.dead_letter_topic, key, None, err.reason,
                        err.message, 1)
        metrics.LABELS.labels(outcome="invalid").inc(len(decoded.errors))
        cfg = await self.config(cols.model_id)
        if cfg is None:
            metrics.LABELS.labels(outcome="not_monitored").inc(len(cols))
            return
        perf = cfg.performance
        for pid, label, t in zip(cols.prediction_id, cols.label, cols.event_time, strict=True):
            if sample_point(pid) >= perf.sample_rate:
                continue  # its prediction was not kept either
            y = binary_label(label)
            if y is None:
                await self.cohorts.count(cols.model_id, "invalid")
                metrics.LABELS.labels(outcome="invalid").inc()
                continue
            await self._join(cols.model_id, perf, pid, y, t, await self.watermark(cols.model_id))

    async def watermark(self, model_id: str) -> float:
        """The model's latest prediction event time read (-inf: none yet)."""
        return (await self.cohorts.stats(model_id)).get("watermark", -math.inf)

    async def unpark(self, model_id: str, perf: PerformanceConfig, caught_up: bool) -> None:
        """Join the parked labels the predictions have caught up with (all of them once
        every prediction partition is read to its end: what is missing then is unknown)."""
        watermark = await self.watermark(model_id)
        for pid, y, t in await self.cohorts.unpark(model_id, math.inf if caught_up else watermark):
            await self._join(model_id, perf, pid, y, t, math.inf if caught_up else watermark)

    async def _join(self, model_id: str, perf: PerformanceConfig, pid: str, y: int, t: float,
                    watermark: float) -> None:
        outcome = await self.cohorts.join(model_id, pid, y, t, perf.threshold, perf.label_horizon_seconds)
        if outcome == "missing":
            if t > watermark:  # its prediction may not have been read yet
                await self.cohorts.park(model_id, pid, y, t)
                return
            outcome = "unknown"
            await self.cohorts.count(model_id, outcome)
        if outcome in ("unknown", "late"):
            log.debug("label %s model=%s prediction=%s", outcome, model_id, pid)
        metrics.LABELS.labels(outcome=outcome).inc()

    # -- evaluation -----------------------------------------------------------------
    async def _predictions_read(self, consumer: AIOKafkaConsumer) -> bool:
        """Is every assigned predictions partition read to its end?"""
        for tp in consumer.assignment():
            if tp.topic == self.settings.predictions_topic:
                high = consumer.highwater(tp)
                if high is None or await consumer.position(tp) < high:
                    return False
        return True

    async def evaluate_all(self, predictions_read: bool = False) -> None:
        """Join what parked labels can be joined, then test the cohorts that matured."""
        for model_id in await self.store.models():
            cfg = await self.config(model_id)
            if cfg is not None:
                await self.unpark(model_id, cfg.performance, predictions_read)
                await self.evaluate_model(model_id, cfg)

    async def evaluate_model(self, model_id: str, cfg: ModelConfig) -> list[dict[str, Any]]:
        """Test every cohort that matured since the last call; the alerts changed."""
        perf, length = cfg.performance, cfg.window_seconds
        watermark = (await self.cohorts.stats(model_id)).get("watermark", -math.inf)
        done = await self.cohorts.evaluations(model_id)
        changed = []
        for start in await self.cohorts.cohort_starts(model_id, 0, math.inf):
            if start in done:
                continue
            cohort = await self.cohorts.cohort(model_id, start, perf.threshold)
            m = maturity(cohort.n, cohort.n_predictions, watermark - (start + length),
                         perf.expected_label_fraction, perf.label_horizon_seconds)
            if not m.mature:
                continue
            baseline = BinaryCohort(perf.threshold)
            for b in done:
                if start - perf.baseline_seconds <= b < start:
                    baseline.merge(await self.cohorts.cohort(model_id, b, perf.threshold))
            results = self.tests(baseline, cohort, cfg)
            now = time.time()
            changed += await self.policy.apply(
                WindowRef(model_id, window_member(length, start, "labels"), start, length, "labels"),
                results, {PERFORMANCE: PERFORMANCE_CHECKS}, cfg, await self.silences.active(now), now)
            estimate = estimate_cohort(cohort)
            realized = cohort_metrics(cohort)
            evaluation = {
                "maturity": {"labeled_fraction": m.labeled_fraction, "reason": m.reason},
                "labeled": cohort.n, "predictions": cohort.n_predictions,
                "realized": realized,
                "estimated": {"accuracy": estimate.accuracy.value, "roc_auc": estimate.roc_auc.value},
                "estimate_error": {
                    k: None if realized[k] is None or getattr(estimate, k).value is None
                    else getattr(estimate, k).value - realized[k] for k in ("accuracy", "roc_auc")},
                "baseline_labeled": baseline.n,
                "results": [{"check": r.check, "status": r.status.value, "effect_size": r.effect_size,
                             "p_value": r.p_value, "floor": r.floor, "reason": r.reason}
                            for r in results],
            }
            await self.cohorts.put_evaluation(model_id, start, evaluation)
            done[start] = evaluation
            metrics.COHORTS_EVALUATED.inc()
        return changed

    @staticmethod
    def tests(baseline: BinaryCohort, current: BinaryCohort, cfg: ModelConfig) -> list[TestResult]:
        perf = cfg.performance
        return [auc_drop_test(baseline, current, PERFORMANCE, floor=perf.auc_floor),
                log_loss_increase_test(baseline, current, PERFORMANCE, floor=perf.log_loss_floor)]
