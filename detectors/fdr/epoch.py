"""The fleet's FDR gate: BatchPRDS over windows with a daily epoch and uniform spending.

The guarantee
-------------
FDR <= alpha within every epoch (default one UTC day), for the whole fleet.
Every (model, window) evaluation is one batch: its eligible p-values are tested
with Benjamini-Hochberg at the batch level below. Batches are ordered by window
slot (window start // slot length) inside the epoch.

Why not the onlineFDR gamma sequences for a service that never stops: with
gamma_j = 0.4375 j^-1.6 the 288th five-minute window of a day gets 1/8,700 of
the first window's level, and any procedure that controls FDR at every horizon
must starve in quiet periods (alpha-death). The epoch is a known horizon, so
the gate spends uniformly over it (gamma_s = 1 / S for the S slots of an
epoch; any non-negative sequence with sum <= 1 is valid) and starts afresh at
the next epoch: the level at 23:55 equals the level at 00:00.

Inside a slot the budget gamma_s is shared by the fleet's batches in
proportion to their sizes, against the slot's capacity N_s: a batch of n tests
is granted g = min(n, N_s - tests already granted in the slot) and spends
gamma_s g / N_s. A slot can never spend more than gamma_s, so the replicas
that evaluate a slot's windows in parallel never coordinate beyond one atomic
counter, and no window waits for another. A window longer than a slot (an
hourly or daily model) spans k slots and claims g in each.

The capacity is derived from what the fleet submits, not declared: when a
slot is first touched, N_s = clamp(ceil(h D), N_min, N_max), with D the
largest number of tests submitted to one slot in this epoch or the L previous
ones (``capacity_lookback_epochs``, default 7: a week of daily epochs; at
least the touching batch's n) and h the headroom (default 1.25), and it stays
fixed for the slot. Why a week and not only the previous epoch: a model whose
windows span the whole epoch (daily windows) touches every slot of it at
once, and a model whose partition runs ahead can have its day D gated while
only its own window of day D - 1 has been; with only the previous epoch to
look at, D would then be sized by that one model (1.25 x its own tests), and
the other models' windows of day D would go unfunded (the demo's weather break paged a day
late for that reason). A week also covers weekday rhythms in what is
submitted. D counts tests, not p-values or discoveries, and
N_s is fixed before any p-value of the slot is gated, so N_s is predictable
and the guarantee below holds for any fleet shape; a fleet of one model gets
the level of one model, a fleet of 10,000 the level of 10,000. A fleet that
grows by more than h between two slots leaves the excess of one slot
unfunded (level 0, counted: nothing is discovered at level 0, not even
p = 0); a fleet that shrinks keeps the larger capacity (a lower level) for at
most L + 1 epochs. D is also at least the fleet's declared demand: the tests
the registered models submit to a slot, as recorded when each was last gated
(a model not gated yet counted like the batch being gated, one not gated for L
epochs of wall-clock time not at all; computed by the service from its
registry; registry and test counts only, no p-value). Peaks count what was
gated, so without it a cold start (a new deployment, a backfill) would let the
first batch gated size every slot it touches, and a model gated more than L
epochs ahead of the others (a replay, a detector catching up) would size the
slots it touches first by itself: the other models' batches of those slots
would go unfunded. The floor N_min (default 20) covers what is left: a fleet
that submits n < 20 tests a slot loses at most a factor n / 20 of its level.

The batch level (BatchPRDS, Zrnic, Jiang, Ramdas & Jordan, "The power of
batching in multiple hypothesis testing", AISTATS 2020, with gamma as above)::

    alpha_b = alpha * (k / S) * (g / N) * (n + R) / n

with N the largest capacity among the batch's k slots (spending g / N <= g / N_s
in each), R the discoveries of the epoch's slots at least ``reward_lag_slots``
before the batch's slot. Counting only a subset of earlier discoveries keeps
alpha_b n / (n + R_{1:b-1}) <= alpha gamma'_b with sum_b gamma'_b <= 1, the
condition of the BatchPRDS guarantee, and makes the level independent of the
order in which replicas finish the windows of recent slots. Valid under
positive dependence (PRDS) inside a batch (a model's features drifting
together) and independence across batches.

Inside a batch the tests may carry prior weights (weighted BH, same batch
level): data-quality checks that fire at p ~ 1e-50 when they fire at all can
lend most of their share to drift tests whose p-values sit near the level.

Pure arithmetic; the counters live in Redis (``service.alerting.fdr``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detectors.fdr.batch import weighted_bh_rejections

#: The longest capacity look-back (the gate keeps 8 epochs of counters).
MAX_LOOKBACK_EPOCHS = 7


@dataclass(frozen=True)
class EpochSpending:
    """Parameters of the fleet FDR gate.

    Parameters
    ----------
    alpha : float
        Target FDR per epoch, in (0, 1).
    epoch_seconds : int
        Epoch length, seconds (default one day); epochs start at multiples of it
        (UTC midnight for a day).
    slot_seconds : int
        Slot length, seconds (the fleet's window length); must divide
        ``epoch_seconds``.
    headroom : float
        h >= 1: a slot's capacity is ceil(h D) for D the largest number of
        tests submitted to one slot in this epoch or the
        ``capacity_lookback_epochs`` previous ones (:meth:`capacity`).
    capacity_lookback_epochs : int
        L in [1, 7]: how many previous epochs' peaks size a slot.
    min_tests_per_slot, max_tests_per_slot : int, int or None
        Bounds of the derived capacity (None: no ceiling). Equal bounds fix
        the capacity (a declared N). Tests beyond a slot's capacity get no
        budget.
    reward_lag_slots : int
        Discoveries count towards the reward only once their slot is this many
        slots older than the batch's.

    Raises
    ------
    ValueError
        On a parameter out of range.

    Examples
    --------
    >>> e = EpochSpending(alpha=0.05, slot_seconds=300)
    >>> e.slots, e.locate(86_400 + 600), e.capacity(800)
    (288, (1, 2), 1000)
    >>> round(e.level(n=10, granted=10, rewarded=0, capacity=1000) * 1e6, 4)  # 0.05/288 * 10/1000
    1.7361
    """

    alpha: float = 0.05
    epoch_seconds: int = 86_400
    slot_seconds: int = 300
    headroom: float = 1.25
    min_tests_per_slot: int = 20
    max_tests_per_slot: int | None = None
    reward_lag_slots: int = 12
    capacity_lookback_epochs: int = 7

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError("alpha must be in (0, 1)")
        if self.slot_seconds < 1 or self.epoch_seconds % self.slot_seconds:
            raise ValueError("slot_seconds must be >= 1 and divide epoch_seconds")
        if not 1.0 <= self.headroom < math.inf:
            raise ValueError("headroom must be >= 1 and finite")
        if self.min_tests_per_slot < 1:
            raise ValueError("min_tests_per_slot must be >= 1")
        if self.max_tests_per_slot is not None and self.max_tests_per_slot < self.min_tests_per_slot:
            raise ValueError("max_tests_per_slot must be >= min_tests_per_slot")
        if self.reward_lag_slots < 1:
            raise ValueError("reward_lag_slots must be >= 1")
        if not 1 <= self.capacity_lookback_epochs <= MAX_LOOKBACK_EPOCHS:
            raise ValueError(f"capacity_lookback_epochs must be in [1, {MAX_LOOKBACK_EPOCHS}]")

    @property
    def slots(self) -> int:
        """S, the slots per epoch."""
        return self.epoch_seconds // self.slot_seconds

    def locate(self, window_start: float) -> tuple[int, int]:
        """(epoch, slot) of a window starting at ``window_start`` (Unix seconds)."""
        epoch, rest = divmod(int(window_start // 1), self.epoch_seconds)
        return epoch, rest // self.slot_seconds

    def span(self, window_seconds: int, slot: int) -> int:
        """k, the slots a window starting in ``slot`` spans (at least 1, at most the
        epoch's remaining slots).

        Examples
        --------
        >>> EpochSpending(slot_seconds=300).span(86_400, 0), EpochSpending().span(60, 5)
        (288, 1)
        """
        return max(1, min(window_seconds // self.slot_seconds, self.slots - slot))

    def place(self, window_start: float, window_seconds: int) -> tuple[int, int, int]:
        """(epoch, first slot, k slots) a window is gated in.

        A window is gated where it starts (:meth:`locate`, :meth:`span`), unless it
        crosses into the next epoch with less than half of its first epoch's worth of
        time before the boundary: then it is gated from slot 0 of the next epoch. A
        window of a local day in a time zone east of UTC (Berlin's starts at 22:00 or
        23:00 UTC) would otherwise claim only the last slots of the UTC epoch, and so a
        small share ``k / S`` of its level; it claims the slots of its time in the next epoch.
        Windows that start on an epoch boundary,
        and windows inside one epoch, are placed where they start. The placement
        depends only on the window's start and length (never on p-values), and each
        window still claims slots of one epoch, so the guarantee is unchanged.

        Examples
        --------
        >>> e = EpochSpending(slot_seconds=300)
        >>> e.place(86_400 - 3_600, 23 * 3_600)  # Berlin, 2024-03-31 (23 h): its 22 h in the next epoch
        (1, 0, 264)
        >>> e.place(5 * 3_600, 86_400)  # New York: mostly in its own epoch
        (0, 60, 228)
        >>> e.place(600, 300), e.place(0, 7 * 86_400)
        ((0, 2, 1), (0, 0, 288))
        """
        epoch, slot = self.locate(window_start)
        boundary = (epoch + 1) * self.epoch_seconds
        before = boundary - window_start
        if window_start + window_seconds > boundary and before < min(window_seconds, self.epoch_seconds) / 2:
            epoch, slot, window_seconds = epoch + 1, 0, int(window_seconds - before)
        return epoch, slot, self.span(window_seconds, slot)

    def capacity(self, demand: int) -> int:
        """N_s of a slot first touched when the fleet's demand is ``demand``.

        Parameters
        ----------
        demand : int
            D >= 0: the largest number of tests submitted to one slot in this
            epoch or the ``capacity_lookback_epochs`` previous ones, and at
            least the touching batch's size.

        Returns
        -------
        int
            clamp(ceil(h D), ``min_tests_per_slot``, ``max_tests_per_slot``).
            The Redis script of ``service.alerting.fdr`` computes the same expression in
            IEEE doubles.

        Examples
        --------
        >>> e = EpochSpending()
        >>> e.capacity(0), e.capacity(8), e.capacity(40), e.capacity(200_000)
        (20, 20, 50, 250000)
        >>> EpochSpending(min_tests_per_slot=50, max_tests_per_slot=100).capacity(8)
        50
        """
        cap = max(self.min_tests_per_slot, math.ceil(self.headroom * max(demand, 0)))
        return cap if self.max_tests_per_slot is None else min(cap, self.max_tests_per_slot)

    def level(self, n: int, granted: int, rewarded: int, capacity: int, span: int = 1) -> float:
        """BH level alpha_b of a batch of ``n`` tests granted ``granted`` of the
        ``capacity`` (the largest among its ``span`` slots) of each of its slots,
        with ``rewarded`` earlier discoveries (0 when n = 0)."""
        if n <= 0 or granted <= 0:
            return 0.0
        return self.alpha * span / self.slots * (granted / capacity) * (n + rewarded) / n

    def wealth(self, slot: int, used: int, capacity: int) -> float:
        """Alpha wealth left in the epoch when slot ``slot`` of capacity ``capacity``
        has granted ``used`` tests: alpha times the spending fraction not yet
        allocated (the unspent share of past slots is forfeited)."""
        left = self.slots - slot - min(used, capacity) / capacity
        return self.alpha * max(left, 0.0) / self.slots

    def decide(self, p_values: Sequence[float], granted: int, rewarded: int, capacity: int,
               span: int = 1, weights: Sequence[float] | None = None) -> np.ndarray:
        """(Weighted) BH at the batch level: boolean mask of discoveries.

        ``weights`` (one per p-value, > 0; None: all 1) share the batch's level
        between its tests (:func:`~detectors.fdr.batch.weighted_bh_rejections`).

        Examples
        --------
        >>> e = EpochSpending(alpha=0.05, slot_seconds=43_200)
        >>> e.decide([1e-4, 0.02, 0.3, 0.9], granted=4, rewarded=0, capacity=4).tolist()
        [True, False, False, False]
        """
        return weighted_bh_rejections(
            p_values, self.level(len(p_values), granted, rewarded, capacity, span), weights)
