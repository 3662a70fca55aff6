"""Worker side of the client: buffered records -> sampled, validated, PII-safe
Kafka messages of one model each, at most ``batch_size`` records and
``max_message_bytes`` bytes. Pure (no I/O, no clock); runs on the worker thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from itertools import count
from typing import Any, Protocol

from sdk.columns import RecordColumns, validate_columns
from sdk.errors import WireError
from sdk.labels import LabelColumns, encode_labels, validate_labels
from sdk.pii import PiiPolicy
from sdk.record import (
    MAX_FEATURES,
    MAX_SLICES,
    TOO_LARGE,
    RecordError,
    check_feature_name,
    check_feature_value,
    check_model_id,
    check_slice_key,
    validate_record,
)
from sdk.sampling import Sampler, sample_point
from sdk.stats import StreamStats
from sdk.vectors import split_vectors
from sdk.wire import encode_columns

log = logging.getLogger("fleetwatch.sdk")

Message = tuple[bytes, bytes, int]  # Kafka key, value, records in it
# A prediction logged by log_prediction, as the hot path stores it:
# (model_id, features, model_version, prediction_id, event_time, score,
#  class_probabilities, predicted_label, slices, latency_ms)
Row = tuple
# A label logged by log_label: (model_id, prediction_id, label, event_time)
LabelRow = tuple
_MAX_REMEMBERED = 10_000  # feature names known to be valid; error fields already logged


class _Batch(Protocol):
    def __len__(self) -> int: ...
    def take(self, keep: Iterable[int]) -> _Batch: ...


def _optional(values: list) -> list | None:
    return values if any(v is not None for v in values) else None


def _prediction_error(one: RecordColumns) -> RecordError | None:
    """The contract error of a one-record batch, checked value by value (the field it names)."""
    try:
        validate_record(asdict(one.records()[0]))
    except RecordError as exc:
        return exc
    return None


def _label_error(one: LabelColumns) -> RecordError | None:
    """The contract error of a one-label batch, checked value by value."""
    errors = validate_labels(one.model_id, one.prediction_id, one.label, one.event_time)[1]
    return errors[0][1] if errors else None


class Batcher:
    """Turns drained buffer contents into Kafka messages and counts what it drops.

    Parameters
    ----------
    batch_size : int
        Records per message at most.
    max_message_bytes : int
        Encoded bytes per message at most; a larger batch is split in halves.
    sampler : Sampler
    pii : PiiPolicy or None
    """

    def __init__(
        self, batch_size: int, max_message_bytes: int, sampler: Sampler, pii: PiiPolicy | None
    ) -> None:
        self.batch_size = batch_size
        self.max_message_bytes = max_message_bytes
        self.sampler = sampler
        self.pii = pii
        # Ids for predictions logged without one: unique per process (a fork makes a new Batcher).
        self._id_prefix = os.urandom(8).hex()
        self._id_counter = count()
        self._valid_names: set[str] = set()
        self._logged: set[str] = set()

    # -- predictions -------------------------------------------------------------------
    def predictions(
        self, rows: list[Row], chunks: list[RecordColumns], stats: StreamStats
    ) -> list[Message]:
        """Messages of rows (grouped by model) and of columnar chunks."""
        groups: dict[Any, list[Row]] = {}
        for row in rows:
            try:
                group = groups.get(row[0])
            except TypeError:  # an unhashable model id
                self._invalid(stats, RecordError("model_id", "must be a non-empty string"))
                continue
            if group is None:
                groups[row[0]] = group = []
            group.append(row)
        out: list[Message] = []
        for model_id, group in groups.items():
            try:
                check_model_id(model_id)
            except RecordError as exc:
                self._invalid(stats, exc, len(group))
                continue
            out += self._prediction_messages(self._columns_of_rows(model_id, group, stats), stats)
        for chunk in chunks:
            out += self._prediction_messages(chunk, stats)
        return out

    def _row_error(self, row: Row) -> RecordError | None:
        """What makes a row impossible to put into columns (checked before building them)."""
        features, slices = row[1], row[8]
        if len(features) > MAX_FEATURES:
            return RecordError("features", f"more than {MAX_FEATURES} features", TOO_LARGE)
        if not self._valid_names.issuperset(features):
            try:
                for name in features:
                    check_feature_name(name)
            except RecordError as exc:
                return exc
            if len(self._valid_names) > _MAX_REMEMBERED:
                self._valid_names.clear()
            self._valid_names.update(features)
        if slices is not None:
            if not isinstance(slices, Mapping) or len(slices) > MAX_SLICES:
                return RecordError("slices", f"must be an object of at most {MAX_SLICES} strings")
            for key in slices:
                try:
                    check_slice_key(key)
                except RecordError as exc:
                    return exc
        return None

    def _columns_of_rows(self, model_id: str, rows: list[Row], stats: StreamStats) -> RecordColumns:
        good = []
        for row in rows:
            error = self._row_error(row)
            if error is None:
                good.append(row)
            else:
                self._invalid(stats, error)
        n = len(good)
        features: dict[str, list[Any]] = {}
        slices: dict[str, list[Any]] = {}
        for i, row in enumerate(good):
            for k, v in row[1].items():
                col = features.get(k)
                if col is None:
                    col = features[k] = [None] * n
                col[i] = v
            if row[8]:
                for k, v in row[8].items():
                    col = slices.get(k)
                    if col is None:
                        col = slices[k] = [None] * n
                    col[i] = v
        columns = [list(c) for c in zip(*(row[2:] for row in good), strict=True)] or [[] for _ in range(8)]
        version, pid, event_time, score, probs, label, _slices, latency = columns
        return RecordColumns(
            model_id, version, pid, event_time, features, _optional(score), _optional(probs),
            _optional(label), slices, _optional(latency),
        )

    def _prediction_messages(self, cols: RecordColumns, stats: StreamStats) -> list[Message]:
        pid = cols.prediction_id
        if None in pid:
            cols.prediction_id = pid = [
                f"{self._id_prefix}-{next(self._id_counter):x}" if p is None else p for p in pid
            ]
        cols = self._sampled(cols, cols.model_id, pid, stats)
        if self.pii is not None:
            cols.features = {k: v for k, v in cols.features.items() if k not in self.pii.drop}
        vectors, dropped = split_vectors(cols.features)
        if vectors:
            cols.vectors = {**cols.vectors, **vectors}
            if self.pii is not None:  # a hashed vector would say nothing: hashing drops it too
                cols.vectors = {k: v for k, v in cols.vectors.items()
                                if k not in self.pii.drop and k not in self.pii.hash}
        for _i, exc in dropped:
            self._invalid_vector(stats, exc)
        try:
            valid, errors = validate_columns(cols.model_id, cols.to_wire())
        except WireError as exc:  # columns of unequal length: no record can be trusted
            self._invalid(stats, RecordError("record", str(exc)), len(cols))
            return []
        for _i, exc in errors:
            self._invalid(stats, exc)
        if self.pii is not None:
            valid = self._hashable(valid, stats)
            valid.features = self.pii.apply_columns(valid.features)
            for name in self.pii.hash:  # hashed: validation's hints no longer describe them
                valid.feature_types.pop(name, None)
                valid.distinct.pop(name, None)
        return self._messages(valid.model_id.encode(), valid, encode_columns, stats, _prediction_error)

    def _hashable(self, cols: RecordColumns, stats: StreamStats) -> RecordColumns:
        """The records whose hashed features hold no integer beyond 64 bits: the hash would
        hide a value the contract refuses (the fast column checks do not bound integers)."""
        bad: dict[int, RecordError] = {}
        for name in self.pii.hash & cols.features.keys():
            for i, v in enumerate(cols.features[name]):
                if type(v) is int and i not in bad:
                    try:
                        check_feature_value(v, name)
                    except RecordError as exc:
                        bad[i] = exc
        if not bad:
            return cols
        for exc in bad.values():
            self._invalid(stats, exc)
        return cols.take([i for i in range(len(cols)) if i not in bad])

    # -- labels ------------------------------------------------------------------------
    def labels(self, rows: list[LabelRow], stats: StreamStats) -> list[Message]:
        """Label messages, one model each."""
        groups: dict[Any, list[LabelRow]] = {}
        for row in rows:
            try:
                groups.setdefault(row[0], []).append(row)
            except TypeError:
                self._invalid(stats, RecordError("model_id", "must be a non-empty string"))
        out: list[Message] = []
        for model_id, group in groups.items():
            try:
                check_model_id(model_id)
            except RecordError as exc:
                self._invalid(stats, exc, len(group))
                continue
            _m, pid, label, event_time = (list(c) for c in zip(*group, strict=True))
            cols = self._sampled(LabelColumns(model_id, pid, label, event_time), model_id, pid, stats)
            valid, errors = validate_labels(model_id, cols.prediction_id, cols.label, cols.event_time)
            for _i, exc in errors:
                self._invalid(stats, exc)
            out += self._messages(model_id.encode(), valid, encode_labels, stats, _label_error)
        return out

    # -- shared ------------------------------------------------------------------------
    def _sampled(self, batch: _Batch, model_id: str, pid: list, stats: StreamStats) -> Any:
        """The records the model's sampling rate keeps (by prediction id)."""
        rate = self.sampler.rate(model_id)
        if rate >= 1.0:
            return batch
        keep = [i for i, p in enumerate(pid) if not isinstance(p, str) or sample_point(p) < rate]
        stats.sampled_out += len(pid) - len(keep)
        return batch.take(keep)

    def _messages(
        self, key: bytes, batch: _Batch, encode: Callable[[Any], bytes], stats: StreamStats,
        explain: Callable[[Any], RecordError | None],
    ) -> list[Message]:
        """Messages of ``batch``; records left out are counted as invalid, each with the
        contract error ``explain`` finds in it (one record) where there is one."""
        split = split_messages(key, batch, encode, self.batch_size, self.max_message_bytes)
        if split.oversized:
            self._invalid(stats, RecordError(
                "record", f"encodes to more than {self.max_message_bytes} bytes", TOO_LARGE), split.oversized)
        for i, error in split.unencodable:
            exc = explain(batch.take([i])) or RecordError("record", f"cannot be encoded ({error})")
            self._invalid(stats, exc)
        return split.messages

    def _invalid_vector(self, stats: StreamStats, exc: RecordError) -> None:
        """Count a vector dropped from its record (the record is sent without it)."""
        stats.vectors_dropped_invalid += 1
        if exc.field not in self._logged and len(self._logged) < _MAX_REMEMBERED:
            self._logged.add(exc.field)
            log.warning("dropping invalid vector(s), records kept: %s (logged once per field)", exc)

    def _invalid(self, stats: StreamStats, exc: RecordError, n: int = 1) -> None:
        stats.dropped_invalid += n
        if exc.field not in self._logged and len(self._logged) < _MAX_REMEMBERED:
            self._logged.add(exc.field)
            log.warning("dropping invalid record(s): %s (logged once per field)", exc)


@dataclass(frozen=True, slots=True)
class Split:
    """A batch cut into messages, and the records left out.

    Attributes
    ----------
    messages : list of (key, value, records)
    oversized : int
        Records left out because one alone encodes to more than the byte limit.
    unencodable : list of (int, str)
        ``(index in the batch, error)`` of each record the encoder refuses: a
        value MessagePack cannot carry (an integer beyond 64 bits, a string
        holding a lone surrogate).
    """

    messages: list[Message]
    oversized: int
    unencodable: list[tuple[int, str]]


def _refused(batch: _Batch, encode: Callable[[Any], bytes], offset: int = 0) -> list[tuple[int, str]]:
    """``(index, error)`` of the records of ``batch`` that ``encode`` refuses, by bisection:
    about 2 log2(n) encodes of shrinking parts per refused record."""
    try:
        encode(batch)
    except Exception as exc:  # any refusal of the encoder is about one of the records
        n = len(batch)
        if n == 1:
            return [(offset, f"{type(exc).__name__}: {exc}")]
        half = n // 2
        return (_refused(batch.take(range(half)), encode, offset)
                + _refused(batch.take(range(half, n)), encode, offset + half))
    return []


def split_messages(
    key: bytes, batch: _Batch, encode: Callable[[Any], bytes], max_records: int, max_bytes: int
) -> Split:
    """Encode a batch as messages of at most ``max_records`` records and ``max_bytes`` bytes.

    A part that encodes too large is split in halves until it fits. A part the
    encoder refuses loses only the records it refuses (found by bisection); the
    rest is cut as usual.

    Parameters
    ----------
    key : bytes
        The Kafka key of every message.
    batch : RecordColumns or LabelColumns
    encode : callable
        Batch -> message value.
    max_records, max_bytes : int

    Returns
    -------
    Split

    Examples
    --------
    >>> from sdk.labels import LabelColumns, encode_labels
    >>> split = split_messages(b"m", LabelColumns("m", ["a", "b", "c"], [1, 2**64, 3], [0.0] * 3),
    ...                        encode_labels, 1_000, 1_000_000)
    >>> [n for _k, _v, n in split.messages], split.unencodable
    ([2], [(1, 'OverflowError: Integer value out of range')])
    """
    messages: list[Message] = []
    oversized = 0
    unencodable: list[tuple[int, str]] = []

    def fit(part: _Batch, value: bytes | None = None) -> None:
        nonlocal oversized
        value = encode(part) if value is None else value
        n = len(part)
        if len(value) <= max_bytes:
            messages.append((key, value, n))
        elif n == 1:
            oversized += 1
        else:
            fit(part.take(range(n // 2)))
            fit(part.take(range(n // 2, n)))

    n = len(batch)
    for start in range(0, n, max_records):
        part = batch if n <= max_records else batch.take(range(start, min(start + max_records, n)))
        try:
            value = encode(part)
        except Exception as exc:  # leave out the records the encoder refuses, then cut the rest
            # (none alone: it refuses their combination, so the part goes whole)
            refused = _refused(part, encode, start) or [
                (start + i, f"{type(exc).__name__}: {exc}") for i in range(len(part))]
            unencodable += refused
            skip = {i - start for i, _e in refused}
            part = part.take([i for i in range(len(part)) if i not in skip])
            value = None
        if len(part):
            fit(part, value)
    return Split(messages, oversized, unencodable)
