"""Control messages on the predictions topic: a request to close a model's open windows now.

A flush request is a Kafka message on the predictions topic, keyed by the model id like
the model's records, with the header ``fw-control: flush`` and the JSON value
``{"model_id": ..., "requested_at": ...}``. Keyed by the model, it lands in the
partition that holds the model's records, behind every record produced before it, and
the aggregator that owns that partition handles it in order: it closes the model's open
windows there and then. Its offset is checkpointed with the windows it closed (one atomic
write), so a crash before the checkpoint replays the request against the state it was
applied to, and a crash after it does not see it again: windows close once, never twice.
A second request finds nothing open and changes nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

CONTROL_HEADER = "fw-control"
FLUSH = b"flush"


@dataclass(frozen=True)
class FlushRequest:
    """Close ``model_id``'s open windows; ``requested_at``: Unix seconds of the request."""

    model_id: str
    requested_at: float

    def encode(self) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
        """``(key, value, headers)`` of the Kafka message.

        Examples
        --------
        >>> key, value, headers = FlushRequest("fraud", 1.0).encode()
        >>> key, headers, decode_control(key, value, headers)
        (b'fraud', [('fw-control', b'flush')], FlushRequest(model_id='fraud', requested_at=1.0))
        """
        value = json.dumps({"model_id": self.model_id, "requested_at": self.requested_at}).encode()
        return self.model_id.encode(), value, [(CONTROL_HEADER, FLUSH)]

    @classmethod
    def now(cls, model_id: str) -> FlushRequest:
        return cls(model_id, time.time())


def is_control(headers) -> bool:
    """Does a message with these Kafka headers carry a control request?"""
    return any(name == CONTROL_HEADER for name, _v in headers or ())


def decode_control(key: bytes | None, value: bytes | None, headers) -> FlushRequest:
    """The request of a control message.

    Raises
    ------
    ValueError
        If it is not a flush request keyed by its own model id.
    """
    kinds = [v for name, v in headers or () if name == CONTROL_HEADER]
    if kinds != [FLUSH]:
        raise ValueError(f"unknown control request {kinds!r}")
    try:
        body = json.loads(value or b"")
        request = FlushRequest(str(body["model_id"]), float(body["requested_at"]))
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"malformed flush request: {exc}") from None
    if key != request.model_id.encode():
        raise ValueError(f"flush request for {request.model_id!r} not keyed by it")
    return request
