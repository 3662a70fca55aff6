"""Compact batch wire encoding of prediction records for Kafka.

One Kafka message carries a batch of records of one model (the message key is
the ``model_id``). The value is MessagePack (https://msgpack.org/ spec). Schema
version 4 (written by this SDK) carries the batch as columns, so field and
feature names appear once per batch, not once per record::

    {"v": 4, "m": model_id,
     "c": {"model_version": [...], "prediction_id": [...], "event_time": [...],
           "features": {name: [...], ...}, "slices": {key: [...], ...},
           "score": [...], "class_probabilities": [...], "predicted_label": [...],
           "latency_ms": [...]}}

Optional columns may be absent; inside a column a missing value is nil. A feature
column, and the ``model_version``, ``event_time``, ``score`` and ``latency_ms``
columns, is an array of values or a packed column (float64 bytes, or a dictionary of
strings and one code per value: :mod:`sdk.packed`), which the aggregator decodes
without a Python object per value. Schema version 3 packs feature columns only,
version 2 none; they and version 1 (rows) are still read, so aggregators upgrade
before the producers that write version 4::

    {"v": 1, "m": model_id,
     "r": [[model_version, prediction_id, event_time, features, score,
            class_probabilities, predicted_label, slices, latency_ms], ...]}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgpack

from sdk.columns import RecordColumns, validate_columns
from sdk.errors import BAD_ENVELOPE, UNKNOWN_SCHEMA_VERSION, WireError, envelope_model_id, unpack_envelope
from sdk.record import SCHEMA_VERSION, PredictionRecord, RecordError, validate_record

ROWS_VERSION = 1
ARRAYS_VERSION = 2
PACKED_FEATURES_VERSION = 3
COLUMNS_VERSION = SCHEMA_VERSION
_ROW_FIELDS = (
    "model_version", "prediction_id", "event_time", "features", "score",
    "class_probabilities", "predicted_label", "slices", "latency_ms",
)


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    """Result of decoding one message.

    Attributes
    ----------
    model_id : str
    columns : RecordColumns
        The valid records, in message order.
    errors : list[tuple[int, RecordError]]
        ``(index in batch, error)`` for each record that violates the contract.
    """

    model_id: str
    columns: RecordColumns
    errors: list[tuple[int, RecordError]]

    @property
    def records(self) -> list[PredictionRecord]:
        """The valid records as objects (slow: one object per record)."""
        return self.columns.records()


def encode_columns(columns: RecordColumns) -> bytes:
    """Encode one model's records, given as columns, as one message value."""
    return msgpack.packb(
        {"v": COLUMNS_VERSION, "m": columns.model_id, "c": columns.to_wire(packed=True)},
        use_bin_type=True
    )


def encode_batch(records: Sequence[PredictionRecord]) -> bytes:
    """Encode records of a single model as one message value.

    Raises
    ------
    ValueError
        If the records are empty or belong to more than one model.

    Examples
    --------
    >>> r = PredictionRecord("m", "1", "p", 1.0, {"x": 2})
    >>> decode_batch(encode_batch([r])).records == [r]
    True
    """
    if not records:
        raise ValueError("empty batch")
    model_id = records[0].model_id
    if any(r.model_id != model_id for r in records):
        raise ValueError("a batch holds records of one model only")
    return encode_columns(RecordColumns.from_records(model_id, records))


def _decode_rows(model_id: str, rows: object) -> tuple[RecordColumns, list[tuple[int, RecordError]]]:
    if not isinstance(rows, list):
        raise WireError(BAD_ENVELOPE, "envelope field r (records) is not a list")
    records: list[PredictionRecord] = []
    errors: list[tuple[int, RecordError]] = []
    for i, row in enumerate(rows):
        try:
            if not isinstance(row, list) or len(row) != len(_ROW_FIELDS):
                raise RecordError("record", f"must be an array of {len(_ROW_FIELDS)} fields", BAD_ENVELOPE)
            data = dict(zip(_ROW_FIELDS, row, strict=True))
            data["model_id"] = model_id
            records.append(validate_record(data))
        except RecordError as exc:
            errors.append((i, exc))
    return RecordColumns.from_records(model_id, records), errors


def decode_batch(value: bytes) -> DecodedBatch:
    """Decode and validate one message value (schema version 1 to 4).

    Parameters
    ----------
    value : bytes
        The Kafka message value.

    Returns
    -------
    DecodedBatch
        Valid records and per-record contract errors.

    Raises
    ------
    WireError
        If the bytes are not a batch envelope of a known schema version; no
        record of such a message can be trusted.
    """
    envelope = unpack_envelope(value)
    if not isinstance(envelope, dict):
        raise WireError(BAD_ENVELOPE, "envelope is not a map")
    version = envelope.get("v")
    if version not in (ROWS_VERSION, ARRAYS_VERSION, PACKED_FEATURES_VERSION, COLUMNS_VERSION):
        raise WireError(UNKNOWN_SCHEMA_VERSION, f"unknown schema version {version!r}")
    model_id = envelope_model_id(envelope)
    if version == ROWS_VERSION:
        columns, errors = _decode_rows(model_id, envelope.get("r"))
    else:
        raw = envelope.get("c")
        if not isinstance(raw, dict):
            raise WireError(BAD_ENVELOPE, "envelope field c (columns) is not a map")
        columns, errors = validate_columns(model_id, raw, packed=version >= PACKED_FEATURES_VERSION,
                                           packed_columns=version >= COLUMNS_VERSION)
    return DecodedBatch(model_id, columns, errors)
