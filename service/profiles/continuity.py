"""Log continuity of one consumed partition: noticing a broker log that went backwards.

A consumer that keeps its offsets outside the broker (the aggregator checkpoints them
to Redis) resumes at offset ``X`` after a restart. If the broker lost its log in the
meantime (an embedded broker on memory storage restarted, a topic deleted and
created again, a volume wiped), offset ``X`` lies beyond the new log's end, or holds
another message: seeking to it either waits silently for the new log to grow past
``X`` (Tansu answers fetches beyond the end with no records) or, once it has,
reads it from the middle, skipping every record before ``X``.

Two checks catch it:

- **The checkpoint's last message.** Each checkpoint stores a :class:`LogMark` of the
  last message it covers (offset, broker timestamp, CRC-32 of the value). On
  (re)assignment the consumer seeks to that message rather than past it; the first
  message fetched must be the same message, or the log was replaced.
- **The fetch high watermark.** Whenever the broker reports a high watermark below
  the next offset the checkpoint expects, the log is shorter than what the
  checkpoint covers. Because a freshly elected Kafka leader may report a lagging
  high watermark for a moment, this must hold for ``confirm_seconds``.

Either way the consumer reads the partition again from its earliest offset. The
records the checkpoints already hold (open windows, closed windows) stay where
they are, and the new log holds only records that were never read, so nothing is
counted twice. A log that lost only its *tail* (an unclean leader election) is
read again from the earliest offset as well: its surviving prefix would be counted
again, which is why durable brokers and clean elections matter.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Literal, Protocol

#: Why a partition's log was found discontinuous (``reason`` label of
#: ``fleetwatch_log_discontinuities_total``).
SHORTER = "shorter"  # the log ends before the checkpointed offset
REPLACED = "replaced"  # the checkpoint's last message is not in the log any more
GAP = "gap"  # the log starts after the checkpointed offset (retention deleted unread records)
DISCONTINUITY_REASONS = (SHORTER, REPLACED, GAP)


class Message(Protocol):
    offset: int
    timestamp: int
    value: bytes | None


@dataclass(frozen=True)
class LogMark:
    """Identity of one message in a partition's log.

    ``offset``: its offset; ``timestamp``: the broker's timestamp (ms); ``crc``: CRC-32
    of its value (0 for a null value); ``size``: bytes of its value.
    """

    offset: int
    timestamp: int
    crc: int
    size: int

    @classmethod
    def of(cls, msg: Message) -> LogMark:
        """The mark of a consumed message.

        Examples
        --------
        >>> from types import SimpleNamespace
        >>> LogMark.of(SimpleNamespace(offset=7, timestamp=1700000000000, value=b"abc"))
        LogMark(offset=7, timestamp=1700000000000, crc=891568578, size=3)
        """
        value = msg.value or b""
        return cls(msg.offset, int(msg.timestamp or 0), zlib.crc32(value), len(value))

    def to_json(self) -> str:
        return json.dumps([self.offset, self.timestamp, self.crc, self.size])

    @classmethod
    def from_json(cls, raw: str | bytes) -> LogMark:
        """Inverse of :meth:`to_json`.

        Raises
        ------
        ValueError
            If ``raw`` is not a mark written by :meth:`to_json`.
        """
        try:
            offset, timestamp, crc, size = json.loads(raw)
            return cls(int(offset), int(timestamp), int(crc), int(size))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a log mark: {raw!r}") from exc


Verdict = Literal["covered", "continues", "replaced", "gap"]


class LogContinuity:
    """Continuity checks of one partition resumed from a checkpoint.

    Parameters
    ----------
    offset : int or None
        Next offset the checkpoint expects (None: no checkpoint, nothing to check).
    mark : LogMark or None
        The checkpoint's last message (None: an older checkpoint without one; only the
        high-watermark check applies).
    confirm_seconds : float
        How long a high watermark below ``offset`` must persist before the log counts
        as shorter.
    """

    def __init__(self, offset: int | None, mark: LogMark | None, confirm_seconds: float) -> None:
        self.mark = mark if offset is not None and mark is not None and mark.offset == offset - 1 else None
        self.confirm_seconds = confirm_seconds
        self._short_since: float | None = None

    def seek_offset(self, offset: int) -> int:
        """Where to seek on assignment: the checkpoint's last message when it has a mark
        (to verify it), else ``offset``."""
        return self.mark.offset if self.mark is not None else offset

    def first_message(self, msg: Message, offset: int) -> Verdict:
        """Judge the first message fetched after assignment (``offset``: the checkpoint's).

        ``covered``: it is the checkpoint's last message (drop it, carry on); ``continues``:
        nothing to verify; ``replaced``: another log; ``gap``: the log now starts after
        the checkpoint (records in between were deleted unread).

        Examples
        --------
        >>> from types import SimpleNamespace as M
        >>> c = LogContinuity(5, LogMark(4, 10, 1, 1), 2.0)
        >>> c.first_message(M(offset=0, timestamp=3, value=b"x"), 5)
        'replaced'
        """
        mark, self.mark = self.mark, None
        if mark is None:
            return "continues"
        if msg.offset == mark.offset and LogMark.of(msg) == mark:
            return "covered"
        if msg.offset >= offset:
            return "gap"
        return "replaced"

    @property
    def verifying(self) -> bool:
        """Is the first message after assignment still awaited?"""
        return self.mark is not None

    def shorter(self, highwater: int | None, offset: int | None, now: float) -> bool:
        """Has the broker reported a high watermark below ``offset`` for at least
        ``confirm_seconds`` (as of ``now``, seconds)?

        Examples
        --------
        >>> c = LogContinuity(100, None, 2.0)
        >>> c.shorter(0, 100, now=10.0), c.shorter(0, 100, now=12.5), c.shorter(150, 100, now=13.0)
        (False, True, False)
        """
        if highwater is None or offset is None or highwater >= offset:
            self._short_since = None
            return False
        if self._short_since is None:
            self._short_since = now
        return now - self._short_since >= self.confirm_seconds

    def reset(self) -> None:
        """Forget pending checks (after resuming from the earliest offset)."""
        self.mark, self._short_since = None, None


__all__ = ["DISCONTINUITY_REASONS", "GAP", "REPLACED", "SHORTER", "LogContinuity", "LogMark"]
