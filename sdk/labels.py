"""The label contract and its Kafka encoding (topic ``fw.labels``, key = ``model_id``).

A label is the ground truth for one earlier prediction, joined to it by
``prediction_id``. One message carries labels of one model as columns,
MessagePack-encoded (label schema version 1)::

    {"v": 1, "k": "labels", "m": model_id,
     "c": {"prediction_id": [...], "label": [...], "event_time": [...]}}

``event_time`` is when the label became known (Unix seconds). A label is a
boolean, an integer of at most 64 bits (-2**63 to 2**64 - 1), a finite float
(regression targets) or a short string.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgpack

from sdk.errors import BAD_ENVELOPE, UNKNOWN_SCHEMA_VERSION, WireError, envelope_model_id, unpack_envelope
from sdk.record import (
    MAX_STRING_LENGTH,
    NOT_FINITE,
    TOO_LARGE,
    RecordError,
    check_event_time,
    check_identifier,
    check_integer,
)

LABELS_VERSION = 1
LABELS_KIND = "labels"
LabelValue = bool | int | float | str


def check_label(value: Any) -> LabelValue:
    """A label: bool, integer of at most 64 bits, finite float or a string of at most
    MAX_STRING_LENGTH characters.

    Raises
    ------
    RecordError
        With ``field="label"``.

    Examples
    --------
    >>> check_label(1), check_label("spam"), check_label(0.25)
    (1, 'spam', 0.25)
    >>> check_label(None)
    Traceback (most recent call last):
    ...
    sdk.record.RecordError: label: must be a bool, number or short string, got NoneType
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return check_integer(value, "label")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RecordError("label", "must be finite", NOT_FINITE)
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING_LENGTH:
            raise RecordError("label", f"string longer than {MAX_STRING_LENGTH}", TOO_LARGE)
        return value
    raise RecordError("label", f"must be a bool, number or short string, got {type(value).__name__}")


@dataclass(slots=True)
class LabelColumns:
    """Labels of one model, column by column (index i is label i everywhere)."""

    model_id: str
    prediction_id: list[str]
    label: list[LabelValue]
    event_time: list[float]

    def __len__(self) -> int:
        return len(self.prediction_id)

    def take(self, keep: Iterable[int]) -> LabelColumns:
        """The labels at the given indices."""
        keep = list(keep)
        return LabelColumns(self.model_id, [self.prediction_id[i] for i in keep],
                            [self.label[i] for i in keep], [self.event_time[i] for i in keep])


@dataclass(frozen=True, slots=True)
class DecodedLabels:
    """Result of decoding one label message.

    Attributes
    ----------
    columns : LabelColumns
        The valid labels, in message order.
    errors : list[tuple[int, RecordError]]
        ``(index in batch, error)`` of each invalid label.
    """

    columns: LabelColumns
    errors: list[tuple[int, RecordError]]


def validate_labels(
    model_id: str, prediction_id: list, label: list, event_time: list
) -> tuple[LabelColumns, list[tuple[int, RecordError]]]:
    """Keep the valid labels of equally long columns.

    Returns
    -------
    columns : LabelColumns
    errors : list[tuple[int, RecordError]]
        ``(index, first error)`` of each invalid label.
    """
    keep: list[int] = []
    errors: list[tuple[int, RecordError]] = []
    for i, (pid, value, t) in enumerate(zip(prediction_id, label, event_time, strict=True)):
        try:
            check_identifier(pid, "prediction_id")
            check_label(value)
            check_event_time(t)
        except RecordError as exc:
            errors.append((i, exc))
        else:
            keep.append(i)
    columns = LabelColumns(model_id, prediction_id, label, event_time)
    return (columns.take(keep) if errors else columns), errors


def encode_labels(columns: LabelColumns) -> bytes:
    """Encode one model's labels as one message value.

    Examples
    --------
    >>> value = encode_labels(LabelColumns("fraud", ["p1", "p2"], [True, False], [1.7e9, 1.7e9]))
    >>> decode_labels(value).columns.label
    [True, False]
    """
    return msgpack.packb(
        {"v": LABELS_VERSION, "k": LABELS_KIND, "m": columns.model_id,
         "c": {"prediction_id": columns.prediction_id, "label": columns.label,
               "event_time": columns.event_time}},
        use_bin_type=True,
    )


def decode_labels(value: bytes) -> DecodedLabels:
    """Decode and validate one label message value.

    Raises
    ------
    WireError
        If the bytes are not a label envelope of a known version; no label of
        such a message can be trusted.
    """
    envelope = unpack_envelope(value)
    if not isinstance(envelope, dict) or envelope.get("k") != LABELS_KIND:
        raise WireError(BAD_ENVELOPE, "not a label batch")
    if envelope.get("v") != LABELS_VERSION:
        raise WireError(UNKNOWN_SCHEMA_VERSION, f"unknown label schema version {envelope.get('v')!r}")
    model_id, cols = envelope_model_id(envelope), envelope.get("c")
    names = ("prediction_id", "label", "event_time")
    if not isinstance(cols, dict) or not all(isinstance(cols.get(c), list) for c in names):
        raise WireError(BAD_ENVELOPE, f"envelope field c must hold the list columns {names}")
    if len({len(cols[c]) for c in names}) != 1:
        raise WireError(BAD_ENVELOPE, "label columns differ in length")
    return DecodedLabels(*validate_labels(model_id, *(cols[c] for c in names)))
