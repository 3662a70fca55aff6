"""The aggregator: Kafka prediction batches -> per-window profiles in Redis.

Exactly-once in effect on at-least-once delivery: per partition, the open
windows' partial profiles, the per-model watermarks and the next Kafka offset
are checkpointed to Redis in one atomic script together with the windows that
closed since the last checkpoint, which are then published to their models' keys
(each model's hash slot) by steps that are safe to repeat, and verified there by the
next checkpoint (:mod:`service.profiles.checkpoints`); a checkpoint interrupted midway
is completed by the partition's next owner. On (re)assignment a partition's checkpoint
is loaded and the consumer seeks to its offset, so a crash at any line replays
exactly the records the stored state does not cover. A fencing epoch per
partition stops a replica that lost a partition from overwriting its new
owner's state. Kafka offsets are committed after each checkpoint (for lag
monitoring; Redis holds the authoritative offset).

Windows are tumbling in event time, per model (length, origin and time zone from the
model's config: :attr:`service.registry.ModelConfig.window_grid`; a window's key holds its
true start and length, so a local day of 23 or 25 hours is one window). A window closes
when the model's watermark minus ``allowed_lateness_seconds`` passes its end (the
watermark: the lower median of the lower-median event times of the model's last messages,
each capped at the time its message was produced; see :meth:`Aggregator._aggregate`), or
when the model has sent
nothing for ``idle_close_seconds`` while its partition has no backlog and the
broker answered a fetch for it in the last ``BROKER_SILENCE_SECONDS``, and not
within ``idle_close_seconds`` of the broker coming back (so a stall, e.g. a Redis
or broker outage, never closes windows whose records are still queued in the
broker or in producers' buffers). Whether the broker answers is sampled per
partition after every poll, not only at checkpoints, so an outage that starts
and ends between two checkpoints still counts. A record for a window that has
closed is late: dead-lettered with reason ``late`` and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections import defaultdict
from time import thread_time  # CPU time, apart from the clocks (tests replace ``time``)

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from threadpoolctl import threadpool_limits

from sdk.columns import RecordColumns
from sdk.errors import BAD_ENVELOPE
from sdk.wire import encode_columns
from service import metrics
from service.kafka import DeadLetters, produced_at
from service.profiles.admission import Admission
from service.profiles.broker_watch import caught_up, export_lag, sample_broker
from service.profiles.checkpoints import RolledBack
from service.profiles.continuity import LogContinuity
from service.profiles.control import FlushRequest, decode_control, is_control
from service.profiles.log_watch import continues, watch_logs
from service.profiles.looks import LOOK_CUT
from service.profiles.partition import (
    PartitionState,
    WindowKey,
)
from service.profiles.refusals import Blame, cap_features, check_vectors, decode_message
from service.profiles.store import Store
from service.registry import ModelConfig
from service.runtime.outage import REDIS_DOWN, RedisOutage
from service.settings import Settings
from service.stored import ConfigCache, model_configs
from sketches import kernels
from sketches.bins import BinCounts, bin_templates
from sketches.profile import WindowProfile

log = logging.getLogger("fleetwatch.aggregator")

CONFIG_TTL_SECONDS = 30.0
#: CPython's cyclic collector thresholds while an aggregator runs (default 700, 10, 10).
#: Open windows hold hundreds of thousands of long-lived containers (sketch tables,
#: counters) that every full collection traverses; with the defaults those collections
#: took about half of the aggregator's CPU (`benchmarks/ingest.py`: 104k -> 205k records per
#: CPU-second). The code keeps few reference cycles, so collecting them less often costs
#: little memory.
GC_THRESHOLDS = (50_000, 20, 100)


def _add_looking(state: PartitionState, key: WindowKey, profile: WindowProfile, part: RecordColumns) -> None:
    """Add ``part`` to the open window ``key``, taking the looks it makes due
    (:mod:`service.profiles.looks`), each timed by the latest record it read. A message
    holding a long stretch of the window in time order (a backlog, a replay) is added in
    pieces cut where its looks fall, so each look reads the records up to its own moment;
    one whose records up to a look are not earlier than the rest by 1/32 of the window (a
    few seconds of records, the usual message) is added whole, the look after it."""
    while True:
        need = state.looks.needed(key, profile.count)
        if need < len(part):
            head_at = max(part.event_time[:need])
            if max(part.event_time) - head_at >= key[2] / LOOK_CUT:
                head, part = part.split(need)
                profile.add_columns(head)
                state.looked.append(state.looks.take(key, profile, float(head_at), state.prior_end(key)))
                continue
        profile.add_columns(part)
        if need <= len(part):
            state.looked.append(state.looks.take(key, profile, float(max(part.event_time)),
                                                 state.prior_end(key)))
        return


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, aggregator: Aggregator) -> None:
        self.aggregator = aggregator

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self.aggregator.release(revoked)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        await self.aggregator.acquire(assigned)


class Aggregator:
    """One aggregator replica (a member of the aggregator consumer group).

    Parameters
    ----------
    settings : Settings
    store : Store
    """

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.topic = settings.predictions_topic
        self.partitions: dict[int, PartitionState] = {}
        self.outage = RedisOutage(settings, "aggregator")
        # Every Redis operation is retried while Redis cannot serve, nothing consumed meanwhile.
        self._configs = model_configs(store, settings, "aggregator", self.outage)
        self._bin_edges = ConfigCache(self._edge_templates, lambda _m: {}, settings.config_ttl_seconds)
        self._bins: dict[str, dict[str, BinCounts]] = {}  # per model, its reference's bin edges
        self.admission = Admission(settings, store, self.outage)
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._dead: DeadLetters | None = None
        self._last_checkpoint = time.monotonic()
        self._interval = settings.checkpoint_interval_seconds

    # -- lifecycle ------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set, then checkpoint and leave the group.

        Raises the process's garbage-collector thresholds to :data:`GC_THRESHOLDS`,
        limits its BLAS threads to ``aggregator_blas_threads`` and loads the sketches'
        compiled loops (:func:`sketches.kernels.load`) before the first record.
        """
        gc.set_threshold(*GC_THRESHOLDS)
        kernels.load()
        s = self.settings
        threadpool_limits(limits=s.aggregator_blas_threads, user_api="blas")
        self._producer = AIOKafkaProducer(
            bootstrap_servers=s.kafka_bootstrap, acks="all",
            enable_idempotence=s.kafka_enable_idempotence,
        )
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=s.kafka_bootstrap, group_id=s.aggregator_group,
            enable_auto_commit=False, auto_offset_reset="earliest",
            max_poll_records=s.max_poll_records,
            session_timeout_ms=s.kafka_session_timeout_ms,
            heartbeat_interval_ms=s.kafka_heartbeat_interval_ms,
        )
        await self._producer.start()
        self._dead = DeadLetters(self._producer, s)
        await self._consumer.start()
        self._consumer.subscribe([self.topic], listener=_Rebalance(self))
        try:
            while not stop.is_set():
                batch = await self._consumer.getmany(timeout_ms=200)
                sample_broker(self._consumer, self.topic, self.partitions)
                await watch_logs(self._consumer, self.topic, self.partitions)
                await self.process(batch)
                export_lag(self._consumer, self.topic, self.partitions)
                if time.monotonic() - self._last_checkpoint >= self._interval:
                    await self.checkpoint_all()
            await self.checkpoint_all(close_windows=False)
        finally:
            with contextlib.suppress(Exception):
                await self._consumer.stop()
            with contextlib.suppress(Exception):
                await self._producer.stop()
            self.partitions.clear()
            metrics.OPEN_WINDOWS.set(0)

    async def acquire(self, assigned: list[TopicPartition]) -> None:
        for tp in assigned:
            if tp.topic != self.topic:
                continue
            cp = await self.outage.call(lambda tp=tp: self.store.acquire_partition(self.topic, tp.partition),
                                        "acquire partition")
            published = await self.outage.call(lambda tp=tp, cp=cp: self.store.publish_pending(
                self.topic, tp.partition, cp, self.settings.retention_window_seconds), "publish windows")
            if published:
                log.info("partition %d: %d window(s) closed by an interrupted checkpoint published",
                         tp.partition, len(published))
            state = PartitionState(tp.partition, cp)
            state.published = published
            state.continuity = LogContinuity(state.offset, state.tail,
                                             self.settings.log_rewind_confirm_seconds)
            self.partitions[tp.partition] = state
            if state.offset is not None:
                self._consumer.seek(tp, state.continuity.seek_offset(state.offset))
            log.info("partition %d acquired (epoch %d, offset %s, %d open windows)",
                     tp.partition, state.epoch, state.offset, len(state.open))
        self._update_open_gauge()

    async def release(self, revoked: list[TopicPartition]) -> None:
        for tp in revoked:
            state = self.partitions.get(tp.partition)
            if state is not None and tp.topic == self.topic:
                await self._checkpoint(state, close_windows=False)
                del self.partitions[tp.partition]
        self._update_open_gauge()

    # -- processing -------------------------------------------------------------------
    async def process(self, batch: dict[TopicPartition, list]) -> None:
        """Decode and aggregate one poll's messages."""
        decoded = []
        blamed: list[Blame] = []  # dead letters to count per model, once the model is known to exist
        for tp, messages in batch.items():
            state = self.partitions.get(tp.partition)
            if state is None:
                # Fetched while the partition's state is still being acquired (or after it
                # was released): read them again once it is ours, or they are lost.
                if messages and tp in self._consumer.assignment():
                    self._consumer.seek(tp, messages[0].offset)
                continue
            if (messages and state.continuity.verifying
                    and not await continues(self._consumer, tp, state, messages[0])):
                continue
            for msg in messages:
                if state.offset is not None and msg.offset < state.offset:
                    continue  # already covered by the checkpoint
                metrics.MESSAGES_CONSUMED.inc()
                control = is_control(msg.headers)  # a flush request (service.profiles.control)
                batch_ = self._control(msg) if control else decode_message(msg, state, blamed, self._dead)
                decoded.append((state, msg, batch_))
        batches = [d for _s, _m, d in decoded if d is not None and not isinstance(d, FlushRequest)]
        refused = await self.admission.refused({d.model_id for d in batches})
        await self.admission.count_blamed(blamed, refused)
        layouts = await self._layouts({d.model_id for d in batches if d.model_id not in refused})
        now_wall = time.time()
        now = time.monotonic()
        for state, msg, batch_ in decoded:
            state.offset = msg.offset + 1
            state.last_msg = msg
            if batch_ is None:
                continue
            if isinstance(batch_, FlushRequest):  # in order: after the records produced before it
                n = state.close_model(batch_.model_id)
                metrics.WINDOWS_FLUSHED.inc(n)
                log.info("flush model=%s: %d open window(s) closed in partition %d",
                         batch_.model_id, n, state.partition)
                continue
            metrics.RECORDS_CONSUMED.inc(len(batch_.columns) + len(batch_.errors))
            source = f"{msg.topic}:{msg.partition}:{msg.offset}"
            if batch_.model_id in refused:
                if len(batch_.columns):
                    self._dead.send(msg.key, encode_columns(batch_.columns), metrics.IMPLICIT_MODEL_LIMIT,
                                    refused[batch_.model_id], len(batch_.columns), source)
                continue
            produced = produced_at(msg.timestamp, now_wall)
            self._aggregate(state, batch_.columns, layouts[batch_.model_id], now_wall, now, produced,
                            source)
        self._update_open_gauge()
        await self._publish_looks({state for state, _m, _b in decoded})

    async def _publish_looks(self, states: set[PartitionState]) -> None:
        """Publish the looks the poll's records made due (before any window they look at is
        announced closed: the next checkpoint does that). Best effort: a look that cannot
        be published is dropped, counted, and the window's close still pages."""
        looks = [look for state in states for look in state.looked]
        for state in states:
            state.looked.clear()
        if not looks:
            return
        try:
            await self.store.publish_looks(looks)
        except REDIS_DOWN as exc:
            metrics.LOOKS_DROPPED.inc(len(looks))
            log.warning("%d look(s) at open windows not published (%s): their windows' closes decide",
                        len(looks), exc)
            return
        metrics.LOOKS_PUBLISHED.inc(len(looks))

    def _control(self, msg) -> FlushRequest | None:
        try:
            return decode_control(msg.key, msg.value, msg.headers)
        except ValueError as exc:
            self._dead.send(msg.key, msg.value, BAD_ENVELOPE, str(exc), 1,
                            f"{msg.topic}:{msg.partition}:{msg.offset}")
            return None

    def _aggregate(self, state: PartitionState, cols: RecordColumns, layout: ModelConfig,
                   now_wall: float, now: float, produced: float | None = None,
                   source: str | None = None) -> None:
        """Route one message's valid records to their open windows.

        Watermark: each message gives one sample, the lower median event time of its
        valid records but at most ``produced`` (when the message was produced: its broker
        timestamp, never later than ``now_wall``) plus ``max_clock_skew_seconds``; the
        model's watermark (before lateness) is the lower median of its last
        ``watermark_messages`` samples. Records stamped in the future can then move it
        neither past the time they were sent (so they never close the windows that
        real-time records are still filling) nor at all unless they make up half of a
        message or half of the recent messages (so a backfill of old data keeps its
        windows too); docs/operations.md, "Watermarks".
        """
        produced = now_wall if produced is None else produced
        model_id = cols.model_id
        clock = state.clocks[model_id]
        cap_features(cols, state.features[model_id], self.settings.max_features_per_model)
        if cols.vectors:
            check_vectors(state, cols, layout, self.settings.max_vector_features_per_model, self._dead,
                          source)
        t = np.asarray(cols.event_time, dtype=np.float64)
        future = t > now_wall + self.settings.max_future_seconds
        # Future records get no window (a time zone's calendar ends in the year 9999).
        starts, lengths = layout.window_grid.assign(np.where(future, now_wall, t) if future.any() else t)
        late = ~future & (starts + lengths <= clock.closed_until)
        ok = ~(future | late)
        for reason, mask in ((metrics.FUTURE_EVENT_TIME, future), (metrics.LATE, late)):
            if mask.any():
                idx = np.flatnonzero(mask).tolist()
                self._dead.send(model_id.encode(), encode_columns(cols.take(idx)), reason,
                                f"{len(idx)} records", len(idx), source)
        if late.any() or future.any():
            clock.late_records += int(late.sum())
            clock.future_records += int(future.sum())
            state.dirty_clocks.add(model_id)
        if not ok.any():
            return
        versions = cols.model_version
        if ok.all() and starts.min() == starts.max() and versions.count(versions[0]) == len(versions):
            groups = {(model_id, versions[0], int(lengths[0]), int(starts[0])): cols}  # the common case
        else:
            by_key: dict[WindowKey, list[int]] = defaultdict(list)
            for i in np.flatnonzero(ok).tolist():
                by_key[(model_id, versions[i], int(lengths[i]), int(starts[i]))].append(i)
            groups = {key: cols.take(idx) for key, idx in by_key.items()}
        for key, part in groups.items():
            profile = state.open.get(key)
            if profile is None:
                profile = state.open[key] = WindowProfile(
                    model_id, key[3], key[2], slice_features=layout.slice_features,
                    max_slice_values=layout.max_slice_values, bins=self._bins.get(model_id))
            else:  # restored from a checkpoint: its features first seen now count in the edges too
                profile.adopt_bins(self._bins.get(model_id))
            _add_looking(state, key, profile, part)
            state.dirty.add(key)
            metrics.RECORDS_AGGREGATED.inc(len(part))
            state.uncheckpointed += len(part)
        valid = t if ok.all() else t[ok]
        mid = (valid.size - 1) // 2  # the lower median (np.partition: 4x cheaper than np.median)
        sample = float(valid[0]) if valid.size == 1 else float(np.partition(valid, mid)[mid])
        clock.advance(min(sample, produced + self.settings.max_clock_skew_seconds),
                      self.settings.watermark_messages)
        clock.last_seen = now
        state.dirty_clocks.add(model_id)

    async def _backfill_idle(self, state: PartitionState) -> dict[str, float]:
        """Idle-close time of the partition's backfilling models (``ModelConfig.backfill``)."""
        configs = await self._configs.get({k[0] for k in state.open})  # cached
        return {m: self.settings.backfill_idle_seconds for m, cfg in configs.items() if cfg.backfill}

    async def _layouts(self, model_ids: set[str]) -> dict[str, ModelConfig]:
        """Each model's configuration (window length, slices), cached for a while; an
        unreadable one is counted and replaced by the model's last good one (else the
        defaults), so the model's records are still aggregated. With it, each model's
        reference bin edges (:mod:`sketches.bins`), which new window profiles count in."""
        self._bins.update(await self._bin_edges.get(model_ids))
        return await self._configs.get(model_ids)

    async def _edge_templates(self, model_ids: list[str]) -> dict[str, dict[str, BinCounts]]:
        edges = await self.outage.call(lambda: self.store.edge_sets(model_ids), "bin edges")
        return {m: bin_templates(e) for m, e in edges.items()}

    # -- checkpoints --------------------------------------------------------------------
    async def checkpoint_all(self, close_windows: bool = True) -> None:
        t0, cpu0, failures = time.monotonic(), thread_time(), self.outage.failed_total
        for state in list(self.partitions.values()):
            await self._checkpoint(state, close_windows)
        self._last_checkpoint = time.monotonic()
        metrics.CHECKPOINT_CPU_SECONDS.inc(thread_time() - cpu0)
        metrics.CHECKPOINT_ROUNDS.inc()
        # A checkpoint re-writes every open window touched since the last one; under
        # load that costs more than the interval, so stretch the interval to keep
        # checkpoints under ``checkpoint_max_share`` of the time, up to 10x (offsets
        # and state stay atomic: a crash re-reads at most one interval of messages).
        # Time spent waiting for an unreachable Redis is not load.
        base = self.settings.checkpoint_interval_seconds
        if self.outage.failed_total == failures:
            cost = self._last_checkpoint - t0
            self._interval = min(max(base, cost / self.settings.checkpoint_max_share), 10 * base)
        metrics.CHECKPOINT_INTERVAL.set(self._interval)
        self._update_open_gauge()

    async def _checkpoint(self, state: PartitionState, close_windows: bool) -> None:
        if close_windows:
            state.close_due(self.settings.allowed_lateness_seconds,
                            self.settings.idle_close_seconds, time.monotonic(),
                            self.settings.max_open_windows, caught_up(self._consumer, self.topic, state,
                                      self.settings.idle_close_seconds),
                            await self._backfill_idle(state))
        updates = state.updates()
        if not updates and not state.deleted and not state.closed and not state.published:
            return
        await self._dead.flush()  # dead letters are durable before offsets move
        with metrics.CHECKPOINT_SECONDS.time():
            try:
                published = await self.outage.call(lambda: self.store.checkpoint(
                    self.topic, state.partition, state.epoch, updates, state.deleted, state.closed,
                    self.settings.retention_window_seconds, state.published, state.seq), "checkpoint")
            except RolledBack:
                # A failover lost the partition's last checkpoints: what Redis holds is older
                # than this process's state, so write the whole state over it.
                metrics.CHECKPOINTS_ROLLED_BACK.inc()
                log.warning("partition %d: its checkpoint in Redis lost writes (a failover before "
                            "replication): rewriting the whole state (%d open windows)",
                            state.partition, len(state.open))
                full = state.updates(full=True)
                published = await self.outage.call(lambda: self.store.checkpoint(
                    self.topic, state.partition, state.epoch, full, [], state.closed,
                    self.settings.retention_window_seconds, state.published, state.seq, full=True),
                    "checkpoint")
        if published is None:
            log.warning("partition %d fenced: another aggregator owns it", state.partition)
            self.partitions.pop(state.partition, None)
            return
        metrics.WINDOWS_CLOSED.inc(len(state.closed))
        metrics.RECORDS_CHECKPOINTED.inc(state.uncheckpointed)
        state.uncheckpointed = 0
        for w in state.closed:
            log.info("window closed model=%s window=%s", w.model_id, w.member)
        state.clear_pending()
        state.published = published
        state.seq += 1
        if state.offset is not None:
            with contextlib.suppress(Exception):
                await self._consumer.commit({TopicPartition(self.topic, state.partition): state.offset})

    def _update_open_gauge(self) -> None:
        metrics.OPEN_WINDOWS.set(sum(len(s.open) for s in self.partitions.values()))
