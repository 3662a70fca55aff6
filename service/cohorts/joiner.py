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
- every ``performance_eval_interval_seconds`` each model's cohorts that have
  *matured* are judged (:mod:`service.cohorts.judging`): tested against their
  baseline, the results through the same FDR gate and alert policy as drift.

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

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from sdk.errors import WireError
from sdk.labels import decode_labels
from sdk.sampling import sample_point
from sdk.wire import decode_batch
from service import metrics
from service.alerting.fdr import PERFORMANCE
from service.alerting.policy import AlertPolicy
from service.alerting.silences import SilenceStore
from service.cohorts import (
    CohortStore,
    codec_for,
)
from service.cohorts.judging import CohortJudge
from service.cohorts.predictions import prediction_ttl, predictions_of
from service.kafka import DeadLetters, key_error, produced_at
from service.profiles.store import Store
from service.registry import ModelConfig, PerformanceConfig
from service.runtime.outage import RedisOutage
from service.settings import Settings
from service.stored import model_configs

__all__ = ["Joiner"]

log = logging.getLogger("fleetwatch.joiner")

class Joiner:
    """One label-joiner replica."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.cohorts = CohortStore(store.r)
        self.judge = CohortJudge(settings, self.cohorts,
                                 AlertPolicy.for_settings(store.r, settings, PERFORMANCE),
                                 SilenceStore(store.r, role="joiner"))
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
                await self.judge.evaluate_model(model_id, cfg, await self.watermark(model_id))
