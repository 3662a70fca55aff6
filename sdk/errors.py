"""Errors of the wire encoding (a whole message cannot be trusted)."""

from __future__ import annotations

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
