"""Counters of a client: what it accepted, sent, sampled out and dropped, by reason."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

PREDICTIONS = "prediction"
LABELS = "label"

BUFFER_FULL = "buffer_full"  # the bounded buffer was full when the record was logged
INVALID = "invalid"  # the record violates the contract (logged once per field)
SEND_FAILED = "send_failed"  # the broker did not acknowledge it within the delivery timeout
CLOSED = "closed"  # logged after close(), or still unsent when close() ran out of time
DROP_REASONS = (BUFFER_FULL, INVALID, SEND_FAILED, CLOSED)


@dataclass
class StreamStats:
    """Counters of one stream (predictions or labels), in records.

    ``accepted`` records entered the buffer; each of them ends up ``sent``,
    ``sampled_out`` (deliberately not sent), dropped with a reason, or is still
    ``buffered``. Records refused at the door (``dropped_buffer_full``, and
    ``dropped_closed`` after ``close()``) are not ``accepted``.
    """

    accepted: int = 0
    sent: int = 0
    sampled_out: int = 0
    dropped_buffer_full: int = 0
    dropped_invalid: int = 0
    dropped_send_failed: int = 0
    dropped_closed: int = 0
    buffered: int = 0
    vectors_dropped_invalid: int = 0
    """Vector features dropped from records that were kept (:mod:`sdk.vectors`: wrong type,
    length or a non-finite component); not a record drop."""

    @property
    def dropped(self) -> int:
        """Records dropped for any reason."""
        return sum(self.dropped_by_reason().values())

    def dropped_by_reason(self) -> dict[str, int]:
        """``reason -> records`` for every reason in :data:`DROP_REASONS`."""
        return {reason: getattr(self, f"dropped_{reason}") for reason in DROP_REASONS}

    def add_dropped(self, reason: str, n: int) -> None:
        """Count ``n`` records dropped for ``reason``."""
        name = f"dropped_{reason}"
        setattr(self, name, getattr(self, name) + n)


@dataclass
class ClientStats(StreamStats):
    """A client's counters: prediction records at the top level, labels in ``labels``.

    Examples
    --------
    >>> s = ClientStats(accepted=3, sent=2, dropped_invalid=1)
    >>> s.dropped, s.labels.sent
    (1, 0)
    """

    labels: StreamStats = field(default_factory=StreamStats)

    def stream(self, name: str) -> StreamStats:
        """The counters of stream ``name`` (:data:`PREDICTIONS` or :data:`LABELS`)."""
        return self if name == PREDICTIONS else self.labels

    def snapshot(self) -> ClientStats:
        """An independent copy."""
        return dataclasses.replace(self, labels=dataclasses.replace(self.labels))
