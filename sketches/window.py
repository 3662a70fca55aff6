"""Tumbling event-time windows."""

from __future__ import annotations

import math


def window_start(event_time: float, window_seconds: int) -> int:
    """Start (Unix seconds) of the tumbling window holding ``event_time``.

    Windows are ``[k * window_seconds, (k + 1) * window_seconds)``, aligned to
    the Unix epoch (UTC).

    Raises
    ------
    ValueError
        If ``window_seconds`` is not positive or ``event_time`` is not finite.

    Examples
    --------
    >>> window_start(1_700_000_123.5, 300)
    1700000100
    """
    if window_seconds <= 0:
        raise ValueError("window_seconds must be positive")
    if not math.isfinite(event_time):
        raise ValueError("event_time must be finite")
    return int(event_time // window_seconds) * window_seconds
