"""The label joiner: delayed labels joined to sampled predictions, cohorts judged when mature.

Consumes the predictions and labels topics (its own consumer group; both
keyed by model id). For tier-1 models with a performance configuration
(:class:`~service.registry.PerformanceConfig`; ``task`` binary,
multiclass or regression):

- predictions kept by the model's join sampling rate (a fixed point of the
  prediction id, ``sdk.sampling.sample_point``, so a label makes the same
  decision as its prediction) are stored with their score (binary), predicted
  class (multiclass) or predicted value (regression), window and slice
  values, and counted into their window's cohort and into one cohort per
  configured slice key and value (``service.cohorts``; values beyond the
  model's ``max_slice_values`` share ``__other__``);
- labels join their prediction: duplicates (same label again) and relabels
  (last wins) are counted, as are labels of unknown predictions, labels later
  than the horizon and labels that do not fit the task; undecodable label
  messages and invalid labels are dead-lettered with their reason. A label
  whose prediction has not been read yet (the labels topic ahead of the
  predictions topic, e.g. while catching up) is parked until the model's
  predictions pass the label's time, then joined or counted unknown;
- every ``performance_eval_interval_seconds`` each cohort that has *matured*
  (labeled fraction reached, or its age in event time past the horizon) is
  tested against the matured cohorts of the trailing baseline period (binary:
  AUC drop, Hanley-McNeil, and log-loss increase, CLT; multiclass: accuracy
  drop, two-proportion z; regression: MAE increase, CLT on |e|) and the
  results go through the same FDR gate and alert policy as drift (feature
  ``__performance__``). Each slice cohort is judged the same way against the
  same slice's baseline, once it is mature itself and both it and its
  baseline pass the minimum sample rule (``slice_min_labeled``,
  ``slice_min_per_class``); its checks are named ``<check>@<key>:<value>``,
  so a slice's regression is an alert series of its own in the model's
  performance incident. An immature cohort is never tested, however alarming
  its partial metrics.

Every step is idempotent (a prediction is stored once, a label replaces the
one it read, a cohort's evaluation is keyed by its window and slice), so
Kafka's at-least-once delivery and concurrent replicas change nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from detectors.performance.maturity import Maturity, maturity
from detectors.performance.report import estimated_metrics, realized_metrics
from detectors.performance.slices import for_slice, sample_shortfall
from detectors.performance.tasks import PERFORMANCE, PERFORMANCE_CHECKS, task_tests
from detectors.result import TestResult
from sdk.errors import WireError
from sdk.labels import decode_labels
from sdk.sampling import sample_point
from sdk.wire import decode_batch
from service import metrics
from service.alerting.policy import AlertPolicy, WindowRef
from service.alerting.silences import SilenceStore
from service.cohorts import (
    Codec,
    CohortStore,
    LoadedCohort,
    codec_for,
    parse_slice_id,
    slice_label,
)
from service.cohorts.predictions import prediction_ttl, predictions_of
from service.kafka import DeadLetters, key_error, produced_at
from service.profiles.keys import window_member
from service.profiles.store import Store
from service.registry import ModelConfig, PerformanceConfig
from service.runtime.outage import RedisOutage
from service.settings import Settings
from service.stored import model_configs

__all__ = ["Joiner", "performance_tests"]

log = logging.getLogger("fleetwatch.joiner")

def insufficient(evaluation: dict[str, Any]) -> bool:
    """Was a cohort's verdict, for any of its checks, ``insufficient_data`` (then more
    labels may still make it testable: the joiner judges it again when they come)?

    Examples
    --------
    >>> insufficient({"results": [{"status": "ok"}, {"status": "insufficient_data"}]})
    True
    >>> insufficient({"results": [{"status": "drift"}]})
    False
    """
    return any(r["status"] == "insufficient_data" for r in evaluation["results"])


def performance_tests(baseline: Any, current: Any, cfg: ModelConfig, alpha: float) -> list[TestResult]:
    """The model task's checks of a current cohort against its baseline
    (:func:`detectors.performance.tasks.task_tests` with the model's performance floors)."""
    perf = cfg.performance
    return task_tests(perf.task, baseline, current, alpha=alpha, auc_floor=perf.auc_floor,
                      log_loss_floor=perf.log_loss_floor, accuracy_floor=perf.accuracy_floor,
                      mae_floor=perf.mae_floor, mae_relative_floor=perf.mae_relative_floor)


class Joiner:
    """One label-joiner replica."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.cohorts = CohortStore(store.r)
        self.policy = AlertPolicy.for_settings(store.r, settings)
        self.silences = SilenceStore(store.r, role="joiner")
        self._configs = model_configs(store, settings, "joiner")
        self.outage = RedisOutage(settings, "joiner")
        self._producer: AIOKafkaProducer | None = None
        self._dead: DeadLetters | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Join and evaluate until ``stop`` is set.

        While Redis cannot serve, the message or the evaluation that failed is handled
        again (:class:`~service.runtime.outage.RedisOutage`) and no offset is committed
        meanwhile; handling a message again changes no stored state (its dead letters, like
        those of a message read again after a crash, may be sent twice)."""
        s = self.settings
        self._producer = AIOKafkaProducer(bootstrap_servers=s.kafka_bootstrap, acks="all",
                                          enable_idempotence=s.kafka_enable_idempotence)
        consumer = AIOKafkaConsumer(
            s.predictions_topic, s.labels_topic, bootstrap_servers=s.kafka_bootstrap,
            group_id=s.joiner_group, enable_auto_commit=False, auto_offset_reset="earliest",
            max_poll_records=s.max_poll_records, session_timeout_ms=s.kafka_session_timeout_ms,
            heartbeat_interval_ms=s.kafka_heartbeat_interval_ms)
        await self._producer.start()
        self._dead = DeadLetters(self._producer, s)
        await consumer.start()
        last_eval = -math.inf
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=200)
                if batch:
                    for tp, messages in batch.items():
                        for msg in messages:
                            await self.outage.call(
                                lambda t=tp.topic, m=msg: self.handle(t, m.key, m.value, m.timestamp),
                                "join message")
                    await self._dead.flush()  # dead letters are durable before offsets move
                    await consumer.commit()
                if time.monotonic() - last_eval >= s.performance_eval_interval_seconds:
                    read = await self._predictions_read(consumer)
                    await self.outage.call(lambda read=read: self.evaluate_all(read), "evaluate cohorts")
                    last_eval = time.monotonic()
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()
            with contextlib.suppress(Exception):
                await self._producer.stop()

    async def config(self, model_id: str) -> ModelConfig | None:
        """The model's configuration if its labels are joined (an unreadable stored one is
        counted and replaced by the last good one, else the defaults: not joined)."""
        cfg = await self._configs.one(model_id)
        return cfg if cfg.joins_labels else None

    async def handle(self, topic: str, key: bytes | None, value: bytes | None,
                     timestamp_ms: int | None = None) -> None:
        """One Kafka message of either topic (``timestamp_ms``: its broker timestamp)."""
        if topic == self.settings.labels_topic:
            await self._labels(key, value)
        else:
            await self._predictions(key, value, timestamp_ms)

    async def _predictions(self, key: bytes | None, value: bytes | None,
                           timestamp_ms: int | None = None) -> None:
        try:
            decoded = decode_batch(value or b"")
        except WireError:
            return  # the aggregator dead-letters undecodable prediction messages
        if key_error(key, decoded.model_id) is not None:
            return  # and those not keyed by their model
        cfg = await self.config(decoded.model_id)
        if cfg is None:
            return
        perf = cfg.performance
        kept = predictions_of(decoded.columns, cfg)
        # The model's watermark (label parking, cohort maturity by age) moves at most to when
        # the message was produced plus the clock skew: predictions stamped in the future
        # must not mature cohorts early (docs/operations.md, "Watermarks").
        progress = min(max((p.event_time for p in kept), default=-math.inf),
                       produced_at(timestamp_ms, time.time()) + self.settings.max_clock_skew_seconds)
        horizon = perf.label_horizon_seconds
        new = await self.cohorts.put_predictions(
            decoded.model_id, kept, prediction_ttl(horizon, cfg.window_seconds),
            self.settings.retention_hourly_seconds,
            codec_for(perf.task, perf.threshold), max_slice_values=cfg.max_slice_values,
            slice_stale_seconds=perf.baseline_seconds + horizon + cfg.window_seconds, progress=progress)
        metrics.JOINED_PREDICTIONS.inc(new)
        await self.unpark(decoded.model_id, perf, caught_up=False)

    async def _labels(self, key: bytes | None, value: bytes | None) -> None:
        try:
            decoded = decode_labels(value or b"")
        except WireError as exc:
            self._dead.send(key, value, exc.reason, str(exc), 1)
            metrics.LABELS.labels(outcome="invalid").inc()
            return
        cols = decoded.columns
        if (refused := key_error(key, cols.model_id)) is not None:
            # Labels of a model share its partition too (as its predictions do).
            n = len(cols) + len(decoded.errors)
            self._dead.send(key, value, *refused, n)
            metrics.LABELS.labels(outcome="invalid").inc(n)
            return
        for _i, err in decoded.errors:
            self._dead.send(key, None, err.reason, str(err), 1)
        metrics.LABELS.labels(outcome="invalid").inc(len(decoded.errors))
        cfg = await self.config(cols.model_id)
        if cfg is None:
            metrics.LABELS.labels(outcome="not_monitored").inc(len(cols))
            return
        perf = cfg.performance
        codec = codec_for(perf.task, perf.threshold)
        joinable = []
        invalid = 0
        for pid, label, t in zip(cols.prediction_id, cols.label, cols.event_time, strict=True):
            if sample_point(pid) >= perf.sample_rate:
                continue  # its prediction was not kept either
            y = codec.label(label)
            if y is None:  # not a label of this task (e.g. "maybe" for a binary model)
                invalid += 1
            else:
                joinable.append((pid, y, float(t)))
        if invalid:
            await self.cohorts.count(cols.model_id, "invalid", invalid)
            metrics.LABELS.labels(outcome="invalid").inc(invalid)
        await self._join(cols.model_id, perf, joinable, await self.watermark(cols.model_id))

    async def watermark(self, model_id: str) -> float:
        """The model's latest prediction event time read (-inf: none yet)."""
        return (await self.cohorts.stats(model_id)).get("watermark", -math.inf)

    async def unpark(self, model_id: str, perf: PerformanceConfig, caught_up: bool) -> None:
        """Join the parked labels the predictions have caught up with (all of them once
        every prediction partition is read to its end: what is missing then is unknown)."""
        watermark = await self.watermark(model_id)
        parked = await self.cohorts.unpark(model_id, math.inf if caught_up else watermark)
        if parked:
            await self._join(model_id, perf, [(pid, str(y), t) for pid, y, t in parked],
                             math.inf if caught_up else watermark)

    async def _join(self, model_id: str, perf: PerformanceConfig, labels: list[tuple[str, str, float]],
                    watermark: float) -> None:
        """Join normalised labels; park those whose prediction may not have been read yet."""
        if not labels:
            return
        outcomes = await self.cohorts.join_many(model_id, labels, codec_for(perf.task, perf.threshold),
                                                perf.label_horizon_seconds)
        unknown = 0
        for (pid, y, t), outcome in zip(labels, outcomes, strict=True):
            if outcome == "missing":
                if t > watermark:  # its prediction may not have been read yet
                    await self.cohorts.park(model_id, pid, y, t)
                    continue
                outcome = "unknown"
                unknown += 1
            if outcome in ("unknown", "late", "invalid"):
                log.debug("label %s model=%s prediction=%s", outcome, model_id, pid)
            metrics.LABELS.labels(outcome=outcome).inc()
        if unknown:
            await self.cohorts.count(model_id, "unknown", unknown)

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

    async def _baseline(self, model_id: str, codec: Codec, starts: list[int], sid: str | None = None
                        ) -> LoadedCohort:
        baseline = codec.empty()
        async for _start, c in self.cohorts.iter_load(model_id, starts, codec, sid):
            baseline.merge(c)
        return baseline

    async def evaluate_model(self, model_id: str, cfg: ModelConfig) -> list[dict[str, Any]]:
        """Test every cohort (whole model, then slices) that matured since the last
        call, and again every cohort judged ``insufficient_data`` that has gained labels
        since; the alerts changed."""
        perf = cfg.performance
        codec = codec_for(perf.task, perf.threshold)
        watermark = await self.watermark(model_id)
        done = await self.cohorts.evaluations(model_id)
        starts = await self.cohorts.cohort_starts(model_id, 0, math.inf)
        changed = []
        reference = (await self.cohorts.reference_cohort(model_id, codec)
                     if perf.baseline == "auto" else None)
        todo = [s for s in starts if s not in done or insufficient(done[s])]
        for start, (n_pred, n_labeled) in zip(
                todo, await self.cohorts.sizes(model_id, [(s, None) for s in todo]), strict=True):
            if start in done and n_labeled <= done[start]["labeled"]:
                continue  # judged insufficient, and no label has arrived since
            if n_pred and not self._maturity(n_labeled, n_pred, start, watermark, cfg).mature:
                continue  # cheap: the counts only (a cohort without them is read in full)
            cohort = await self.cohorts.load(model_id, start, codec)
            m = self._maturity(cohort.labeled, cohort.predictions, start, watermark, cfg)
            if not m.mature:
                continue
            # The labelled reference when there is one: fixed before any live label, so the
            # baseline cannot drift into the data after a change.
            baseline = reference if reference is not None else await self._baseline(
                model_id, codec, [b for b in done if start - perf.baseline_seconds <= b < start])
            if start in done:
                metrics.COHORTS_REJUDGED.inc()
                log.info("cohort re-judged model=%s window=%s labeled=%d (was %d: insufficient data)",
                         model_id, start, cohort.labeled, done[start]["labeled"])
            results = performance_tests(baseline.metrics, cohort.metrics, cfg, self.settings.alpha)
            changed += await self._apply(model_id, cfg, start, "labels", results, force=True)
            evaluation = self._evaluation(perf.task, cohort, baseline, m, results)
            evaluation["baseline"] = "trailing" if reference is None else "reference"
            await self.cohorts.put_evaluation(model_id, start, evaluation)
            done[start] = evaluation
            metrics.COHORTS_EVALUATED.inc()
        return changed + await self.evaluate_slices(model_id, cfg, codec, starts, watermark)

    async def evaluate_slices(self, model_id: str, cfg: ModelConfig, codec: Codec, starts: list[int],
                              watermark: float) -> list[dict[str, Any]]:
        """Test every slice cohort that matured since the last call, each against the
        same slice's judged cohorts of the baseline period; the alerts changed."""
        perf = cfg.performance
        pending = await self.cohorts.windows_pending_slices(model_id)
        if not pending:
            return []
        # The pending windows and the baselines they may need.
        near = [s for s in starts if min(pending) - perf.baseline_seconds <= s <= max(pending)]
        present = await self.cohorts.window_slices(model_id, pending)
        judged = await self.cohorts.judged_slices(model_id, near)
        todo = [(s, sid) for s in pending for sid in sorted(present[s] - judged.get(s, set()))]
        changed = []
        for (start, sid), (n_pred, n_labeled) in zip(todo, await self.cohorts.sizes(model_id, todo),
                                                    strict=True):
            m = self._maturity(n_labeled, n_pred, start, watermark, cfg)
            if not m.mature:
                continue
            cohort = await self.cohorts.load(model_id, start, codec, sid)
            baseline = await self._baseline(
                model_id, codec,
                [b for b in near if start - perf.baseline_seconds <= b < start and sid in judged[b]], sid)
            key, value = parse_slice_id(sid)
            label = slice_label(key, value)
            shortfall = sample_shortfall(baseline.metrics, cohort.metrics, perf.slice_min_labeled,
                                         perf.slice_min_per_class if perf.task == "binary" else 0)
            results = for_slice(performance_tests(baseline.metrics, cohort.metrics, cfg, self.settings.alpha),
                                label, shortfall)
            changed += await self._apply(model_id, cfg, start, f"labels@{label}", results)
            evaluation = self._evaluation(perf.task, cohort, baseline, m, results)
            evaluation["slice"] = {"key": key, "value": value}
            await self.cohorts.put_slice_evaluation(model_id, start, sid, evaluation,
                                                    self.settings.retention_hourly_seconds)
            judged.setdefault(start, set()).add(sid)
            metrics.COHORTS_EVALUATED.inc()
        for start in pending:
            await self.cohorts.settle_slices(model_id, start)
        return changed

    def _maturity(self, labeled: int, predictions: int, start: int, watermark: float,
                  cfg: ModelConfig) -> Maturity:
        perf = cfg.performance
        return maturity(labeled, predictions, watermark - (start + cfg.window_grid.window_at(start)[1]),
                        perf.expected_label_fraction, perf.label_horizon_seconds)

    async def _apply(self, model_id: str, cfg: ModelConfig, start: int, version: str,
                     results: list[TestResult], force: bool = False) -> list[dict[str, Any]]:
        """The window's results through the FDR gate and the alert policy (a slice whose
        checks could not run is skipped: it has nothing to gate or record)."""
        if not force and not any(r.p_value is not None for r in results):
            return []
        now = time.time()
        length = cfg.window_grid.window_at(start)[1]  # a local day may be 23 or 25 hours
        alerting = {PERFORMANCE: PERFORMANCE_CHECKS | {r.check for r in results}}
        return await self.policy.apply(
            WindowRef(model_id, window_member(length, start, version), start, length, version),
            results, alerting, cfg, await self.silences.active(now), now)

    @staticmethod
    def _evaluation(task: str, cohort: LoadedCohort, baseline: LoadedCohort, m: Maturity,
                    results: list[TestResult]) -> dict[str, Any]:
        realized = realized_metrics(task, cohort.metrics)
        estimated = estimated_metrics(task, cohort.metrics, cohort.confidence_sum, cohort.confidence_n)
        compared = [k for k in ("accuracy", "roc_auc") if k in estimated]
        return {
            "maturity": {"labeled_fraction": m.labeled_fraction, "reason": m.reason},
            "labeled": cohort.labeled, "predictions": cohort.predictions,
            "realized": realized,
            "estimated": {k: estimated[k] for k in compared},
            "estimate_error": {k: None if realized.get(k) is None or estimated[k] is None
                               else estimated[k] - realized[k] for k in compared},
            "baseline_labeled": baseline.labeled,
            "results": [{"check": r.check, "status": r.status.value, "effect_size": r.effect_size,
                         "p_value": r.p_value, "floor": r.floor, "reason": r.reason}
                        for r in results],
        }
