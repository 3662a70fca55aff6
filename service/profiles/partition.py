"""One partition's aggregation state: open windows, model clocks, broker freshness.

Pure bookkeeping, no I/O: :class:`PartitionState` holds what the aggregator keeps per
partition between checkpoints (the open windows' partial profiles, each model's
event-time clock, its dead-letter counts, the windows closed since the last checkpoint)
and renders it as the fields of the partition's checkpoint (:meth:`PartitionState.updates`),
from which :class:`PartitionState` is rebuilt when the partition is acquired again.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field

from service import metrics
from service.profiles.checkpoints import ClosedWindow, PartitionCheckpoint
from service.profiles.continuity import LogContinuity, LogMark
from service.profiles.keys import DEAD_FIELD, dead_field, window_member
from service.profiles.looks import LookTracker, WindowLook
from sketches.profile import WindowProfile

WindowKey = tuple[str, str, int, int]  # model, version, window length, start
_OPEN = "open:"
_MAX_EVENT = "wm:"
_RECENT = "wq:"
_CLOSED_UNTIL = "cu:"
_TAIL = "tail"  # LogMark of the last message the checkpoint covers
LATE = "late:"
FUTURE = "fut:"
#: A partition counts as caught up (so idle windows may close) only if the broker answered
#: a fetch for it this recently, and not until ``idle_close_seconds`` after it answers
#: again: during a broker outage the backlog is unknown and producers buffer, and windows
#: closed then would turn their records into late records.
BROKER_SILENCE_SECONDS = 5.0


@dataclass
class BrokerFreshness:
    """Whether the broker answers fetches for one partition, as sampled after each poll.

    ``polled_at``: wall-clock time (s) of the last fetch response seen (None: none yet);
    ``silent``: the last sample found none within :data:`BROKER_SILENCE_SECONDS`;
    ``back_at``: when a sample last found the broker answering again after silence.
    """

    polled_at: float | None = None
    silent: bool = False
    back_at: float = -math.inf

    def sample(self, polled_ms: int | None, now: float) -> None:
        """Record the partition's last fetch-response time (ms, None: none) as seen at ``now``."""
        self.polled_at = None if polled_ms is None else polled_ms / 1000.0
        if self.polled_at is None or now - self.polled_at > BROKER_SILENCE_SECONDS:
            self.silent = True
        elif self.silent:
            self.silent, self.back_at = False, now

    def settled(self, now: float, settle_seconds: float) -> bool:
        """The broker answered within :data:`BROKER_SILENCE_SECONDS` of ``now`` (as last
        sampled) and has not come back within ``settle_seconds``."""
        return (not self.silent and self.polled_at is not None
                and now - self.polled_at <= BROKER_SILENCE_SECONDS
                and now - self.back_at >= settle_seconds)


def _open_field(key: WindowKey) -> str:
    return _OPEN + json.dumps(list(key))


@dataclass
class ModelClock:
    """Event-time progress of one model within one partition.

    ``max_event_time`` is the model's watermark before lateness: the lower median of
    the ``recent`` samples (one per message, see :meth:`Aggregator._aggregate`), never
    moving back.
    """

    max_event_time: float = -math.inf
    closed_until: float = -math.inf
    late_records: int = 0  # dead-lettered as late, ever (persisted with the partition)
    future_records: int = 0  # dead-lettered as too far in the future, ever (likewise)
    last_seen: float = field(default_factory=time.monotonic)
    recent: list[float] = field(default_factory=list)  # the last messages' samples, oldest first

    def advance(self, sample: float, keep: int) -> None:
        """Add one message's event-time sample; the watermark moves to the lower median of
        the last ``keep`` samples if that is later.

        Examples
        --------
        >>> c = ModelClock()
        >>> for t in (100.0, 110.0, 1e9, 120.0):  # one message an outlier
        ...     c.advance(t, 5)
        >>> c.max_event_time
        110.0
        """
        self.recent.append(sample)
        del self.recent[:-keep]
        ordered = sorted(self.recent)
        self.max_event_time = max(self.max_event_time, ordered[(len(ordered) - 1) // 2])


class PartitionState:
    """Open windows and event-time clocks of the models in one partition, and its models'
    dead-letter counts."""

    def __init__(self, partition: int, cp: PartitionCheckpoint) -> None:
        self.partition = partition
        self.epoch = cp.epoch
        self.seq = cp.seq  # checkpoints written (service.profiles.checkpoints)
        self.offset = cp.offset
        self.uncheckpointed = 0  # records aggregated since the last checkpoint written
        self.open: dict[WindowKey, WindowProfile] = {}
        self.clocks: dict[str, ModelClock] = defaultdict(ModelClock)
        self.dirty: set[WindowKey] = set()
        self.looks = LookTracker()
        self.looked: list[WindowLook] = []  # taken, not yet published (aggregator.py)
        self.dirty_clocks: set[str] = set()
        self.closed: list[ClosedWindow] = []
        # published by the last checkpoint, verified and forgotten by the next (checkpoints.py)
        self.published: list[ClosedWindow] = []
        self.deleted: list[str] = []
        self.features: dict[str, set[str]] = defaultdict(set)  # feature names seen per model
        # per model, the dimension of each undeclared vector feature (fixed by its first vector)
        self.vector_dims: dict[str, dict[str, int]] = defaultdict(dict)
        # records dead-lettered per (model, reason) other than late / future, ever (checkpointed)
        self.dead: dict[tuple[str, str], int] = {}
        self.dirty_dead: set[tuple[str, str]] = set()
        self.broker = BrokerFreshness()
        self.last_msg = None  # the last message consumed (its LogMark is checkpointed)
        tail = cp.fields.get(_TAIL)
        self.tail = None if tail is None else LogMark.from_json(tail)
        self.continuity = LogContinuity(None, None, 0.0)  # set on acquisition
        for name, value in cp.fields.items():
            if name.startswith(_OPEN):
                m, v, length, start = json.loads(name[len(_OPEN):])
                profile = self.open[(m, v, length, start)] = WindowProfile.from_bytes(value)
                self.features[m].update(profile.features)
                self.vector_dims[m].update((k, v.dim) for k, v in profile.vectors.items())
            elif name.startswith(_MAX_EVENT):
                self.clocks[name[len(_MAX_EVENT):]].max_event_time = float(value)
            elif name.startswith(_RECENT):
                self.clocks[name[len(_RECENT):]].recent = [float(t) for t in json.loads(value)]
            elif name.startswith(_CLOSED_UNTIL):
                self.clocks[name[len(_CLOSED_UNTIL):]].closed_until = float(value)
            elif name.startswith(LATE):
                self.clocks[name[len(LATE):]].late_records = int(value)
            elif name.startswith(FUTURE):
                self.clocks[name[len(FUTURE):]].future_records = int(value)
            elif name.startswith(DEAD_FIELD):
                m, reason = json.loads(name[len(DEAD_FIELD):])
                self.dead[(m, reason)] = int(value)

    def count_dead(self, model_id: str, reason: str, n: int) -> None:
        """Count ``n`` records of ``model_id`` dead-lettered under ``reason`` (persisted with
        the next checkpoint, together with the offsets that cover them: counted once)."""
        key = (model_id, reason)
        self.dead[key] = self.dead.get(key, 0) + n
        self.dirty_dead.add(key)

    def close_due(self, lateness: float, idle_seconds: float, now: float, max_open: int,
                  caught_up: bool, idle_by_model: dict[str, float] | None = None) -> None:
        """Move windows past the watermark to ``closed``, and those of models idle
        for ``idle_seconds`` (``idle_by_model[model]`` if given: backfilling models)
        while the partition is ``caught_up`` (no backlog that could hold their
        records); if more than ``max_open`` remain open, close the oldest early."""
        idle_by_model = idle_by_model or {}
        by_age = sorted(self.open, key=lambda k: k[3])
        for key in by_age:
            clock = self.clocks[key[0]]
            end = key[3] + key[2]
            idle = caught_up and now - clock.last_seen >= idle_by_model.get(key[0], idle_seconds)
            if end <= clock.max_event_time - lateness or idle:
                self._close(key)
        excess = [k for k in by_age if k in self.open][: max(len(self.open) - max_open, 0)]
        for key in excess:
            self._close(key)
        metrics.WINDOWS_CLOSED_EARLY.inc(len(excess))

    def _close(self, key: WindowKey) -> None:
        m, version, length, start = key
        profile = self.open.pop(key)
        self.dirty.discard(key)
        self.looks.forget(key)
        self.deleted.append(_open_field(key))
        self.closed.append(ClosedWindow(m, window_member(length, start, version), start, profile.to_bytes(),
                                        profile.count))
        metrics.SLICE_RECORDS_CAPPED.inc(sum(s.capped_records for s in profile.slices.values()))
        clock = self.clocks[m]
        clock.closed_until = max(clock.closed_until, start + length)
        self.dirty_clocks.add(m)
        if not any(k[0] == m for k in self.open):
            self.features.pop(m, None)  # the next window learns its features afresh

    def prior_end(self, key: WindowKey) -> int:
        """End of the latest window of ``key``'s model before ``key`` that this partition
        holds open or has closed (0: none; :attr:`~service.profiles.looks.WindowLook.prior_end`)."""
        m, _version, _length, start = key
        ends = [k[3] + k[2] for k in self.open if k[0] == m and k[3] < start]
        closed = self.clocks[m].closed_until
        if closed > -math.inf:
            ends.append(int(min(closed, start)))
        return max(ends, default=0)

    def close_model(self, model_id: str) -> int:
        """Close every open window of ``model_id`` now (a flush request); returns how many."""
        keys = [k for k in self.open if k[0] == model_id]
        for key in sorted(keys, key=lambda k: k[3]):
            self._close(key)
        return len(keys)

    def updates(self, full: bool = False) -> dict[str, bytes | str | int]:
        """The checkpoint's fields changed since the last checkpoint, or (``full``) all of
        them: the whole state, for a checkpoint that replaces what Redis holds."""
        if full:
            self.dirty, self.dirty_clocks, self.dirty_dead = set(self.open), set(self.clocks), set(self.dead)
        out: dict[str, bytes | str | int] = {}
        if self.offset is not None:
            out["offset"] = self.offset
        if self.last_msg is not None:
            out[_TAIL] = LogMark.of(self.last_msg).to_json()
        elif full and self.tail is not None:
            out[_TAIL] = self.tail.to_json()
        # Rewritten every interval while open: digests' buffered values are written as they
        # are, never compressed by a checkpoint (read back as buffered).
        for key in self.dirty:
            out[_open_field(key)] = self.open[key].to_bytes(fast=True)
        for m in self.dirty_clocks:
            c = self.clocks[m]
            out[_MAX_EVENT + m] = repr(c.max_event_time)
            out[_RECENT + m] = json.dumps(c.recent)
            out[_CLOSED_UNTIL + m] = repr(c.closed_until)
            if c.late_records:
                out[LATE + m] = c.late_records
            if c.future_records:
                out[FUTURE + m] = c.future_records
        for key in self.dirty_dead:
            out[dead_field(*key)] = self.dead[key]
        return out

    def clear_pending(self) -> None:
        self.dirty.clear()
        self.dirty_clocks.clear()
        self.dirty_dead.clear()
        self.closed.clear()
        self.deleted.clear()
