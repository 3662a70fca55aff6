"""Tumbling event-time windows."""

from __future__ import annotations

import numpy as np


def window_starts(event_times: np.ndarray, window_seconds: int) -> np.ndarray:
    """Start (Unix seconds, int64) of the tumbling window holding each event time.

    Windows are ``[k * window_seconds, (k + 1) * window_seconds)``, aligned to
    the Unix epoch (UTC).

    Raises
    ------
    ValueError
        If ``window_seconds`` is not positive.

    Examples
    --------
    >>> window_starts(np.array([1_700_000_123.5, 1_700_000_400.0]), 300).tolist()
    [1700000100, 1700000400]
    """
    if window_seconds <= 0:
        raise ValueError("window_seconds must be positive")
    return (np.asarray(event_times, dtype=np.float64) // window_seconds).astype(np.int64) * window_seconds
