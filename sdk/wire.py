"""Compact batch wire encoding of prediction records for Kafka.

One Kafka message carries a batch of records of one model (the message key is
the ``model_id``). The value is MessagePack (https://msgpack.org/ spec)::

    {"v": SCHEMA_VERSION, "m": model_id,
     "r": [[model_version, prediction_id, event_time, features, score,
            class_probabilities, predicted_label, slices, latency_ms], ...]}

Records are positional arrays so field names are not repeated per record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgpack

from sdk.record import SCHEMA_VERSION, PredictionRecord, RecordError, validate_record

MAX_BATCH_BYTES = 8 * 1024 * 1024
_FIELDS = (
    "model_version",
    "prediction_id",
    "event_time",
    "features",
    "score",
    "class_probabilities",
    "predicted_label",
    "slices",
    "latency_ms",
)


UNDECODABLE = "undecodable"
MESSAGE_TOO_LARGE = "message_too_large"
BAD_ENVELOPE = "bad_envelope"
UNKNOWN_SCHEMA_VERSION = "unknown_schema_version"
WIRE_REASONS = (UNDECODABLE, MESSAGE_TOO_LARGE, BAD_ENVELOPE, UNKNOWN_SCHEMA_VERSION)


class WireError(ValueError):
    """A whole message could not be decoded.

    Attributes
    ----------
    reason : str
        One of :data:`WIRE_REASONS`.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    """Result of decoding one message.

    Attributes
    ----------
    model_id : str
    records : list[PredictionRecord]
        The valid records, in message order.
    errors : list[tuple[int, RecordError]]
        ``(index in batch, error)`` for each record that violates the contract.
    """

    model_id: str
    records: list[PredictionRecord]
    errors: list[tuple[int, RecordError]]


def record_row(r: PredictionRecord) -> list:
    """Positional row of one record, in wire field order."""
    return [
        r.model_version,
        r.prediction_id,
        r.event_time,
        r.features,
        r.score,
        r.class_probabilities,
        r.predicted_label,
        r.slices,
        r.latency_ms,
    ]


def encode_rows(model_id: str, rows: Sequence[list]) -> bytes:
    """Encode positional rows (see :func:`record_row`) of one model as one message value."""
    return msgpack.packb({"v": SCHEMA_VERSION, "m": model_id, "r": list(rows)}, use_bin_type=True)


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
    return encode_rows(model_id, [record_row(r) for r in records])


def decode_batch(value: bytes) -> DecodedBatch:
    """Decode and validate one message value.

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
    if not isinstance(value, bytes | bytearray):
        raise WireError(BAD_ENVELOPE, "message value is empty")
    if len(value) > MAX_BATCH_BYTES:
        raise WireError(MESSAGE_TOO_LARGE, f"message larger than {MAX_BATCH_BYTES} bytes")
    try:
        envelope = msgpack.unpackb(value, raw=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise WireError(UNDECODABLE, f"undecodable: {type(exc).__name__}: {exc}") from None
    if not isinstance(envelope, dict):
        raise WireError(BAD_ENVELOPE, "envelope is not a map")
    version = envelope.get("v")
    if version != SCHEMA_VERSION:
        raise WireError(UNKNOWN_SCHEMA_VERSION, f"unknown schema version {version!r}")
    model_id = envelope.get("m")
    rows = envelope.get("r")
    if not isinstance(model_id, str) or not model_id:
        raise WireError(BAD_ENVELOPE, "envelope field m (model_id) missing")
    if not isinstance(rows, list):
        raise WireError(BAD_ENVELOPE, "envelope field r (records) is not a list")
    records: list[PredictionRecord] = []
    errors: list[tuple[int, RecordError]] = []
    for i, row in enumerate(rows):
        try:
            if not isinstance(row, list) or len(row) != len(_FIELDS):
                raise RecordError("record", f"must be an array of {len(_FIELDS)} fields", BAD_ENVELOPE)
            data = dict(zip(_FIELDS, row, strict=True))
            data["model_id"] = model_id
            records.append(validate_record(data))
        except RecordError as exc:
            errors.append((i, exc))
    return DecodedBatch(model_id, records, errors)
