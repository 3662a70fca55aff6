"""Learned floors: what a feature normally moves window to window.

A configured floor is one number for every feature; a stable feature would
page on a real change far below it, a restless one (daily demand rhythm, a
weekend mix) pages for its usual movement above it. The floor that applies is
``max(configured floor, learned floor)``, the learned floor being the movement
the feature shows between windows while nothing is wrong -- the Phase I of
statistical process control, which sets the limits of the monitoring phase
(Phase II) from data known to be in control (Montgomery 2019, ch. 6; Woodall
2000).

The in-control data are the reference's rows split into the model's windows
by their event times (``time_column`` of the reference upload): each chunk is
tested against the whole reference with the live windows' tests. A chunk's
effect mixes the feature's movement with sampling noise at the chunk's size,
which the live test's p-value already accounts for at the live window's
size; so the noise is measured too, on random partitions of the same rows
into chunks of the same sizes (no time order, so no movement), and
subtracted:

    m = Q_q(|effect| of the time chunks)
    s = mean over partitions of Q_q(|effect| of its chunks)
    learned = max(0, m - s)              for a divergence (PSI)
    learned = sqrt(max(0, m^2 - s^2))    for a distance or a difference (every other effect)

with ``Q_q`` the empirical ``q``-quantile over as many chunks on both sides
(default 0.99: the feature's largest usual movement -- its rhythm's peak is
what must not page -- short of the top 1 %, so that one bad hour in the
reference does not blind the feature). Sampling noise adds to a divergence
(its plug-in estimate is biased up by about (k - 1) / N_eff, Cressie & Read
1984) and, in quadrature, to a distance or a difference (``E[d_obs^2] = d^2 +
se^2``). Chunks smaller than the live windows are noisier, and their quantile
errs high: the learned floor is then conservative (a reference with as many
rows per window as live traffic learns what live windows see).

Pure functions over test results: the service builds the chunks and runs the
tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from detectors.result import Status, TestResult

#: Feature name of window-level checks (volume): they have no movement to learn here.
WINDOW_FEATURE = ""
#: Checks whose effect is a divergence: sampling noise adds to it (every other effect is a
#: distance or a difference, to which it adds in quadrature).
DIVERGENCES = frozenset({"psi"})
CONFIGURED = "configured"
LEARNED = "learned"


@dataclass(frozen=True, slots=True)
class LearnedFloor:
    """One (feature, check)'s learned floor and the figures it came from.

    Attributes
    ----------
    floor : float
        ``movement`` less ``noise`` (module docstring), in the check's effect unit.
    movement : float
        ``Q_q`` of ``|effect|`` over the time-ordered chunks.
    noise : float
        ``Q_q`` of ``|effect|`` over the chunks of a random partition of the same
        rows into chunks of the same sizes, averaged over partitions.
    chunks : int
        Time chunks whose test decided (status ok or drift).
    """

    floor: float
    movement: float
    noise: float
    chunks: int


@dataclass(frozen=True)
class LearnedFloors:
    """A model's learned floors, per feature and check, and how they were learned.

    Attributes
    ----------
    source : str
        ``"reference"``: the reference's rows split into windows by event time.
    window_seconds : int
        The window length the chunks had; the floors apply to windows of this length.
    quantile : float
        ``q`` of the rule (module docstring).
    chunks : int
        Time chunks the reference split into.
    floors : dict[str, dict[str, LearnedFloor]]
        feature -> check -> learned floor.
    note : str or None
        Why nothing was learned (too few chunks), else None.
    """

    source: str
    window_seconds: int
    quantile: float
    chunks: int
    floors: dict[str, dict[str, LearnedFloor]] = field(default_factory=dict)
    note: str | None = None

    def get(self, feature: str, check: str) -> LearnedFloor | None:
        return self.floors.get(feature, {}).get(check)

    def to_dict(self) -> dict:
        """Plain data for JSON (:meth:`from_dict` reads it back)."""
        return {"source": self.source, "window_seconds": self.window_seconds, "quantile": self.quantile,
                "chunks": self.chunks, "note": self.note,
                "floors": {f: {c: [v.floor, v.movement, v.noise, v.chunks] for c, v in checks.items()}
                           for f, checks in self.floors.items()}}

    @classmethod
    def from_dict(cls, d: Mapping) -> LearnedFloors:
        """Raises ``KeyError``, ``TypeError`` or ``ValueError`` on data :meth:`to_dict` did not write."""
        return cls(str(d["source"]), int(d["window_seconds"]), float(d["quantile"]), int(d["chunks"]),
                   {str(f): {str(c): LearnedFloor(float(v[0]), float(v[1]), float(v[2]), int(v[3]))
                             for c, v in checks.items()} for f, checks in d["floors"].items()},
                   None if d.get("note") is None else str(d["note"]))

    def combined(self, other: LearnedFloors) -> LearnedFloors:
        """Per (feature, check) the larger of two learnings (e.g. of two uploads of one reference).

        Examples
        --------
        >>> a = LearnedFloors("reference", 3600, 0.95, 24, {"x": {"psi": LearnedFloor(0.1, 0.2, 0.1, 24)}})
        >>> b = LearnedFloors("reference", 3600, 0.95, 10, {"x": {"psi": LearnedFloor(0.3, 0.4, 0.1, 10)}})
        >>> c = a.combined(b); c.get("x", "psi").floor, c.chunks
        (0.3, 34)
        """
        floors = {f: dict(checks) for f, checks in self.floors.items()}
        for f, checks in other.floors.items():
            for c, v in checks.items():
                old = floors.setdefault(f, {}).get(c)
                if old is None or v.floor > old.floor:
                    floors[f][c] = v
        note = self.note if other.note is not None and self.note is not None else None
        return LearnedFloors(self.source, self.window_seconds, self.quantile, self.chunks + other.chunks,
                             floors, note)


def _effects(windows: Iterable[Sequence[TestResult]]) -> dict[tuple[str, str], list[float]]:
    """|effect| per (feature, check) over windows, of the results that decided."""
    out: dict[tuple[str, str], list[float]] = {}
    for results in windows:
        for r in results:
            if (r.feature != WINDOW_FEATURE and r.effect_size is not None
                    and r.status in (Status.OK, Status.DRIFT)):
                out.setdefault((r.feature, r.check), []).append(abs(r.effect_size))
    return out


def denoised(check: str, movement: float, noise: float) -> float:
    """``movement`` less the sampling ``noise``: linearly for a divergence, in quadrature
    otherwise, at least 0.

    Examples
    --------
    >>> denoised("psi", 0.5, 0.1), round(denoised("ks", 0.5, 0.3), 3), denoised("ks", 0.1, 0.3)
    (0.4, 0.4, 0.0)
    """
    if check in DIVERGENCES:
        return max(0.0, movement - noise)
    return math.sqrt(max(0.0, movement * movement - noise * noise))


def learn_floors(
    chunks: Sequence[Sequence[TestResult]],
    shuffled: Sequence[Sequence[Sequence[TestResult]]],
    window_seconds: int,
    quantile: float = 0.99,
    min_chunks: int = 8,
    source: str = "reference",
) -> LearnedFloors:
    """Learned floors from the test results of time chunks and of shuffled chunks.

    Parameters
    ----------
    chunks : sequence of sequence of TestResult
        Per time chunk (the reference's rows of one window), its results against
        the whole reference.
    shuffled : sequence of sequence of sequence of TestResult
        Per random partition of the same rows into chunks of the same sizes, the
        results of each of its chunks (any number of partitions).
    window_seconds : int
        The chunks' window length, seconds.
    quantile : float
        ``q`` in (0, 1].
    min_chunks : int
        A (feature, check) needs at least this many decided time chunks (and as
        many in each partition) to be learned, >= 2.

    Returns
    -------
    LearnedFloors
        ``floors`` holds every (feature, check) with enough chunks (window-level
        checks left out); ``note`` says why there are none when
        ``len(chunks) < min_chunks``.

    Raises
    ------
    ValueError
        If ``quantile`` is not in (0, 1] or ``min_chunks < 2``.

    Notes
    -----
    ``m = Q_q(e_time)``, ``s = mean_j Q_q(e_partition_j)``, the floor
    :func:`denoised` (module docstring); ``Q_q`` is numpy's linear-interpolation quantile (Hyndman &
    Fan 1996, definition 7). Each partition has as many chunks as the time
    split, so both quantiles are taken over samples of one size.

    Examples
    --------
    A feature whose windows move by 0.3 in one chunk of ten, against chunks of
    pure noise 0.05:

    >>> from detectors.result import judged
    >>> r = lambda e: [judged("psi", "x", e, e, 0.5, 100, 1000)]
    >>> time = [r(0.05)] * 9 + [r(0.35)]
    >>> noise = [[r(0.05)] * 10, [r(0.04)] * 9 + [r(0.06)]]
    >>> f = learn_floors(time, noise, 3600, quantile=0.95, min_chunks=8).get("x", "psi")
    >>> round(f.floor, 3), round(f.movement, 3), round(f.noise, 3), f.chunks
    (0.164, 0.215, 0.05, 10)
    >>> learn_floors(time[:3], noise, 3600).note
    'the reference splits into 3 windows of 3600 s; 8 are needed to learn floors'
    """
    if not 0.0 < quantile <= 1.0:
        raise ValueError("quantile must be in (0, 1]")
    if min_chunks < 2:
        raise ValueError("min_chunks must be >= 2")
    if len(chunks) < min_chunks:
        return LearnedFloors(source, window_seconds, quantile, len(chunks), {},
                             f"the {source} splits into {len(chunks)} windows of {window_seconds} s; "
                             f"{min_chunks} are needed to learn floors")
    partitions = [_effects(p) for p in shuffled]
    floors: dict[str, dict[str, LearnedFloor]] = {}
    for key, effects in sorted(_effects(chunks).items()):
        noise = [p.get(key, []) for p in partitions]
        if len(effects) < min_chunks or not noise or min(map(len, noise)) < min_chunks:
            continue
        moved = float(np.quantile(effects, quantile))
        still = float(np.mean([np.quantile(e, quantile) for e in noise]))
        floors.setdefault(key[0], {})[key[1]] = LearnedFloor(denoised(key[1], moved, still), moved, still,
                                                             len(effects))
    return LearnedFloors(source, window_seconds, quantile, len(chunks), floors)


@dataclass(frozen=True, slots=True)
class AppliedFloor:
    """The floor a test ran with and why.

    Attributes
    ----------
    floor : float
        ``max(configured, learned)``.
    source : str
        ``"configured"`` or ``"learned"`` (the larger; ties go to configured).
    reason : str
        The figures, in words.
    """

    floor: float
    source: str
    reason: str


def applied_floor(check: str, configured: float, learned: LearnedFloor | None,
                  learning: LearnedFloors | None = None) -> AppliedFloor:
    """``max(configured, learned)`` with its source and reason.

    Examples
    --------
    >>> lf = LearnedFloors("reference", 3600, 0.95, 24)
    >>> a = applied_floor("psi", 0.02, LearnedFloor(0.06, 0.08, 0.02, 24), lf)
    >>> print(a.reason)  # doctest: +NORMALIZE_WHITESPACE
    learned: psi moves 0.06 window to window (95th percentile 0.08 of 24 reference
    windows of 3600 s, minus 0.02 of shuffled ones) > configured 0.02
    >>> applied_floor("psi", 0.2, LearnedFloor(0.06, 0.08, 0.02, 24), lf).source
    'configured'
    >>> applied_floor("psi", 0.2, None).reason
    'configured 0.2 (nothing learned)'
    """
    if learned is None:
        return AppliedFloor(configured, CONFIGURED, f"configured {configured:.3g} (nothing learned)")
    q = f"{100 * learning.quantile:g}th percentile" if learning is not None else "quantile"
    where = (f"{learned.chunks} {learning.source} windows of {learning.window_seconds} s"
             if learning is not None else f"{learned.chunks} windows")
    figures = (f"{check} moves {learned.floor:.3g} window to window ({q} {learned.movement:.3g} of "
               f"{where}, minus {learned.noise:.3g} of shuffled ones)")
    if learned.floor > configured:
        return AppliedFloor(learned.floor, LEARNED, f"learned: {figures} > configured {configured:.3g}")
    return AppliedFloor(configured, CONFIGURED, f"configured {configured:.3g} >= learned: {figures}")
