"""The bounded hand-off between the threads that log and the client's worker.

Lock-free on the logging side: the caller only appends to a ``deque`` (one C
call, atomic under the GIL), so logging is safe from any thread and from a
signal handler, and can never deadlock. Drops at the door are recorded the
same way, as ``(stream, reason, records, error)`` markers that the worker (or
a reader of the stats) turns into counts, logging ``error`` if there is one.
"""

from __future__ import annotations

import logging
import threading
from collections import deque

from sdk.stats import CLOSED, ClientStats

log = logging.getLogger("fleetwatch.sdk")


class Buffer:
    """Pending predictions (rows and columnar chunks), labels and drop markers.

    Parameters
    ----------
    max_records : int
        At most this many predictions logged one by one, as many again in
        columnar chunks, and as many labels, are held.
    chunk_records : int
        Records per columnar chunk at most (chunks are bounded in number:
        ``max_records // chunk_records``).
    """

    def __init__(self, max_records: int, chunk_records: int) -> None:
        if max_records < 1 or chunk_records < 1:
            raise ValueError("max_records and chunk_records must be positive")
        self.rows: deque[tuple] = deque()
        self.chunks: deque = deque()
        self.labels: deque[tuple] = deque()
        self.drops: deque[tuple[str, str, int, str | None]] = deque()
        self.max_rows = max_records
        self.max_chunks = max(1, max_records // chunk_records)
        self.max_labels = max_records
        self._collecting = threading.Lock()

    def drain(self) -> tuple[list[tuple], list, list[tuple]]:
        """Take everything buffered (worker thread only)."""
        return tuple(  # type: ignore[return-value]
            [q.popleft() for _ in range(len(q))] for q in (self.rows, self.chunks, self.labels)
        )

    def discard(self, stats: ClientStats) -> None:
        """Drop everything buffered, counting it as accepted and dropped (``closed``)."""
        rows, chunks, labels = self.drain()
        for stream, n in ((stats, len(rows) + sum(map(len, chunks))), (stats.labels, len(labels))):
            stream.accepted += n
            stream.add_dropped(CLOSED, n)

    def pending(self) -> tuple[int, int]:
        """Predictions and labels buffered now."""
        return len(self.rows) + sum(map(len, list(self.chunks))), len(self.labels)

    def collect_drops(self, stats: ClientStats) -> None:
        """Add the drop markers to ``stats``. Never waits: if another thread is
        collecting (or this one was interrupted by a signal while collecting),
        the markers stay for the next call."""
        if not self._collecting.acquire(blocking=False):
            return
        try:
            drops = self.drops
            for _ in range(len(drops)):
                stream, reason, n, error = drops.popleft()
                stats.stream(stream).add_dropped(reason, n)
                if error:
                    log.warning("fleetwatch SDK dropped %d %s record(s): %s", n, stream, error)
        finally:
            self._collecting.release()
