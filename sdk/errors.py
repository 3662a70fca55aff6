"""The outer layer of every Kafka message value: size limit, MessagePack, and
the errors that make a whole message untrustworthy."""

from __future__ import annotations

from typing import Any

import msgpack

from sdk.record import RecordError, check_model_id

MAX_BATCH_BYTES = 8 * 1024 * 1024

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


def unpack_envelope(value: Any) -> Any:
    """Unpack a message value (MessagePack, at most MAX_BATCH_BYTES).

    Raises
    ------
    WireError
        ``bad_envelope`` for a missing value, ``message_too_large``, or
        ``undecodable`` bytes (including strings that are not UTF-8 and maps keyed
        by an array).
    """
    if not isinstance(value, bytes | bytearray):
        raise WireError(BAD_ENVELOPE, "message value is empty")
    if len(value) > MAX_BATCH_BYTES:
        raise WireError(MESSAGE_TOO_LARGE, f"message larger than {MAX_BATCH_BYTES} bytes")
    try:
        return msgpack.unpackb(value, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise WireError(UNDECODABLE, f"undecodable: {type(exc).__name__}: {exc}") from None


def envelope_model_id(envelope: dict) -> str:
    """The model id of an unpacked envelope (field ``m``), under the one model id rule
    (:func:`sdk.record.check_model_id`).

    Raises
    ------
    WireError
        ``bad_envelope`` if it is missing or breaks the rule: no record of the message
        can be attributed to a model.
    """
    try:
        return check_model_id(envelope.get("m"))
    except RecordError as exc:
        raise WireError(BAD_ENVELOPE, f"envelope field m ({exc})") from None
