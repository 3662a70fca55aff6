"""The fixed score grid shared by every binary cohort and the label-free estimate.

Every :class:`~detectors.performance.binary.BinaryCohort` of every model bins
its scores on the same fixed grid over [0, 1], so histograms merge by adding
counts and a cohort built today compares bin for bin with one built last year.

Layout
------
* a uniform part: bins of width 1/4000 = 2.5e-4 with edges k / 4000 over
  [0.005, 0.995) (3,960 bins). Equal-width calibration bins whose count
  divides 4000 (10, 20, 25, 40, 50, 100, ...) are unions of whole grid bins;
* two geometric tails for the scores of imbalanced or confident models
  (fraud, abuse), which pile up near 0 or 1: edges at 0.005 * 2^(-j/16)
  (and 1 - 0.005 * 2^(-j/16)), j = 1..528, i.e. 16 bins per octave over 33
  octaves, each 4.4 % of its distance to the nearer end wide (at 0.005 that
  is 2.2e-4, just under the uniform width, so resolution never drops where
  the two parts meet);
* one end bin each side for everything within 0.005 * 2^-33 = 5.8e-13 of 0
  or 1 (with the exact 0.0 or 1.0).

5,018 bins in all (``N_BINS``). A score ``s`` falls in bin ``k`` when
``EDGES[k] <= s < EDGES[k + 1]``; 1.0 falls in the last bin.

Resolution
----------
Two scores can be counted as tied only when they share a bin: scores more
than 2.5e-4 apart never are, nor are scores whose distances to the nearer
end (0 or 1) differ by more than 4.4 %. Scores 1e-9 apart on either side of
an edge are not tied; scores 1e-9 apart inside one bin are (e.g. 0.3 and
0.3 + 1e-9). What ties cost the ROC AUC is bounded per cohort, see
:mod:`detectors.performance.binary`.
"""

from __future__ import annotations

import numpy as np

UNIFORM_BINS = 4000
TAIL_START = 20
"""The geometric tails replace the first and last ``TAIL_START`` uniform bins ([0, 0.005) and [0.995, 1])."""
TAIL_BINS_PER_OCTAVE = 16
TAIL_OCTAVES = 33
GRID_ID = f"u{UNIFORM_BINS}-t{TAIL_START}-g{TAIL_BINS_PER_OCTAVE}x{TAIL_OCTAVES}"
"""Names the grid in serialised cohorts; cohorts on different grids never merge."""


def _edges() -> np.ndarray:
    h = 1.0 / UNIFORM_BINS
    j = np.arange(TAIL_BINS_PER_OCTAVE * TAIL_OCTAVES, 0, -1, dtype=np.float64)
    low = TAIL_START * h * np.exp2(-j / TAIL_BINS_PER_OCTAVE)  # ascending, all < TAIL_START * h
    uniform = np.arange(TAIL_START, UNIFORM_BINS - TAIL_START + 1, dtype=np.float64) / UNIFORM_BINS
    high = 1.0 - low[::-1]
    edges = np.concatenate(([0.0], low, uniform, high, [1.0]))
    if not np.all(np.diff(edges) > 0):  # pragma: no cover - a construction invariant
        raise AssertionError("score grid edges must increase strictly")
    edges.setflags(write=False)
    return edges


EDGES: np.ndarray = _edges()
"""Bin edges, float64, strictly increasing from 0.0 to 1.0 (``N_BINS + 1`` values, read-only)."""
N_BINS: int = EDGES.size - 1
WIDTHS: np.ndarray = np.diff(EDGES)
MIDPOINTS: np.ndarray = (EDGES[:-1] + EDGES[1:]) / 2.0
MAX_WIDTH: float = 1.0 / UNIFORM_BINS
"""Widest bin: 2.5e-4, the uniform part (up to float64 rounding of the edges, 1e-16)."""
WIDTHS.setflags(write=False)
MIDPOINTS.setflags(write=False)
_INNER = EDGES[1:-1]


def bin_index(scores: np.ndarray) -> np.ndarray:
    """Grid bin of each score (int64 array of the same shape).

    Parameters
    ----------
    scores : np.ndarray
        Scores in [0, 1], finite (not checked here; see :func:`check_scores`).

    Returns
    -------
    np.ndarray
        ``k`` with ``EDGES[k] <= s < EDGES[k + 1]`` (``N_BINS - 1`` for s = 1.0).

    Examples
    --------
    >>> bin_index(np.array([0.0, 0.5 - 1e-9, 0.5 + 1e-9, 1.0])).tolist()
    [0, 2508, 2509, 5017]
    """
    return np.searchsorted(_INNER, scores, side="right").astype(np.int64)


def check_scores(scores: np.ndarray) -> np.ndarray:
    """``scores`` as a 1-D float64 array, or ``ValueError`` if any is outside [0, 1] or NaN.

    Examples
    --------
    >>> check_scores([0.2, 1.0]).tolist()
    [0.2, 1.0]
    >>> check_scores([1.5])
    Traceback (most recent call last):
    ...
    ValueError: scores must be probabilities in [0, 1]; got 1 value(s) outside (first: 1.5)
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    bad = ~((s >= 0.0) & (s <= 1.0))  # NaN fails both comparisons
    if bad.any():
        raise ValueError(f"scores must be probabilities in [0, 1]; got {int(bad.sum())} value(s) "
                         f"outside (first: {float(s[bad][0])!r})")
    return s


def histogram(scores: np.ndarray) -> np.ndarray:
    """Counts of ``scores`` per grid bin (int64, length ``N_BINS``).

    Examples
    --------
    >>> h = histogram(np.array([0.1, 0.1, 0.9]))
    >>> int(h.sum()), int(h[bin_index(np.array([0.1]))[0]])
    (3, 2)
    """
    s = check_scores(scores)
    return np.bincount(bin_index(s), minlength=N_BINS).astype(np.int64)


def sparse(counts: np.ndarray) -> list[list[int]]:
    """Plain-data form of a count array: ``[gaps between non-zero bins, their counts]``.

    The first gap is the first non-zero bin's index; gaps keep the integers
    small (one MessagePack byte each for a dense histogram).

    Examples
    --------
    >>> sparse(np.array([0, 3, 0, 0, 1]))
    [[1, 3], [3, 1]]
    >>> dense(sparse(np.array([0, 3, 0, 0, 1])), 5).tolist()
    [0, 3, 0, 0, 1]
    """
    idx = np.flatnonzero(counts)
    gaps = np.diff(idx, prepend=0) if idx.size else idx
    return [gaps.tolist(), counts[idx].tolist()]


def dense(data: list[list[int]], size: int = N_BINS) -> np.ndarray:
    """Inverse of :func:`sparse`.

    Raises
    ------
    ValueError
        If the indices do not fit ``size`` or a count is negative.
    """
    gaps, cnt = data
    idx = np.cumsum(np.asarray(gaps, dtype=np.int64))
    c = np.asarray(cnt, dtype=np.int64)
    if idx.shape != c.shape or (idx.size and (idx[-1] >= size or idx.min() < 0)) or (c < 0).any():
        raise ValueError("malformed sparse histogram")
    out = np.zeros(size, dtype=np.int64)
    out[idx] = c
    return out
