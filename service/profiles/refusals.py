"""What the aggregator refuses in a message, and why: records dead-lettered by reason and
counted per model, vectors dropped from their records, features beyond a model's cap.
Each dead letter goes to the dead-letter topic (:class:`service.kafka.DeadLetters`) with its
reason and a JSON detail of the first 100 refusals of that reason."""

from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sdk.columns import RecordColumns
from sdk.errors import WireError
from sdk.record import RecordError
from sdk.vectors import drop_reason
from sdk.wire import decode_batch, encode_columns
from service import metrics
from service.kafka import DeadLetters, key_error
from service.profiles.partition import PartitionState
from service.registry import ModelConfig
from sketches.vector import clean_vectors


@dataclass(frozen=True, slots=True)
class Refusals:
    """The refusals of one reason in a message: the records' indices and a JSON detail."""

    reason: str
    rows: list[int]
    detail: str

    @property
    def n(self) -> int:
        return len(self.rows)


def by_reason(errors: list[tuple[int, RecordError]], reason_of=lambda e: e.reason) -> list[Refusals]:
    """``(index, error)`` pairs grouped by reason, each with the first 100 as JSON detail."""
    by_reason: dict[str, list[tuple[int, RecordError]]] = defaultdict(list)
    for i, e in errors:
        by_reason[reason_of(e)].append((i, e))
    return [Refusals(reason, [i for i, _e in group], json.dumps(
        [{"index": i, "field": e.field, "message": e.message} for i, e in group[:100]]))
        for reason, group in by_reason.items()]


@dataclass(frozen=True)
class Blame:
    """``n`` records of ``model_id`` dead-lettered under ``reason`` from a message of ``state``."""

    state: PartitionState
    model_id: str
    reason: str
    n: int


def decode_message(msg: Any, state: PartitionState, blamed: list[Blame], dead: DeadLetters) -> Any:
    """A Kafka message's decoded batch (None: dead-lettered whole, to ``dead``); each dead
    letter is also added to ``blamed`` under the model the message names: its envelope's ``model_id``, or its
    key when the envelope does not decode."""
    source = f"{msg.topic}:{msg.partition}:{msg.offset}"
    try:
        batch = decode_batch(msg.value)
    except WireError as exc:
        dead.send(msg.key, msg.value, exc.reason, str(exc), 1, source)
        with contextlib.suppress(UnicodeDecodeError, AttributeError):
            blamed.append(Blame(state, msg.key.decode(), exc.reason, 1))
        return None
    if (refused := key_error(msg.key, batch.model_id)) is not None:
        # Records of one model must share a partition, or two partitions' halves of
        # a window would close under the same key and overwrite each other.
        n = len(batch.columns) + len(batch.errors)
        dead.send(msg.key, msg.value, *refused, n, source)
        blamed.append(Blame(state, batch.model_id, refused[0], n))
        return None
    for e in by_reason(batch.errors):
        dead.send(msg.key, msg.value, e.reason, e.detail, e.n, source)
        blamed.append(Blame(state, batch.model_id, e.reason, e.n))
    for e in by_reason(batch.columns.vector_drops, drop_reason):  # the records are kept
        dead.send(msg.key, msg.value, e.reason, e.detail, e.n, source)
        blamed.append(Blame(state, batch.model_id, e.reason, e.n))
    return batch


def check_vectors(state: PartitionState, cols: RecordColumns, layout: ModelConfig, max_features: int,
                  dead: DeadLetters, source: str | None) -> None:
    """Drop (set to None, dead-letter and count) each vector that is not finite or not of its
    feature's dimension: the declared one (``ModelConfig.vector_features``), else the one
    its first vector in the partition's open windows fixed. The records are kept. Undeclared
    vector features beyond ``max_features`` (``max_vector_features_per_model``) are dropped
    (counted)."""
    dims = state.vector_dims[cols.model_id]
    room = max_features - len(dims)
    for name in [k for k in cols.vectors if k not in dims and k not in layout.vector_features]:
        if room > 0:
            room -= 1
        else:
            dropped = cols.vectors.pop(name)
            metrics.FEATURES_DROPPED.inc(sum(v is not None for v in dropped))
    for name, column in cols.vectors.items():
        dim = layout.vector_features.get(name) or dims.get(name)
        clean = clean_vectors(column, name, dim)
        if name not in dims and clean.rows.size:
            dims[name] = clean.matrix.shape[1]
        if not clean.dropped:
            continue
        for e in by_reason(clean.dropped, drop_reason):
            dead.send(cols.model_id.encode(), encode_columns(cols.take(e.rows)), e.reason,
                            e.detail, e.n, source)
            state.count_dead(cols.model_id, e.reason, e.n)
        for i, _exc in clean.dropped:
            column[i] = None


def cap_features(cols: RecordColumns, known: set[str], cap: int) -> None:
    """Learn the batch's new feature names up to the model's cap; drop the rest (counted)."""
    if cols.features.keys() <= known:
        return
    for name in list(cols.features):
        if name in known:
            continue
        if len(known) < cap:
            known.add(name)
        else:
            dropped = cols.features.pop(name)
            metrics.FEATURES_DROPPED.inc(sum(v is not None for v in dropped))
