"""Simulation of the fleet FDR gate: realized FDR per epoch, power and alpha-death.

What it simulates
-----------------
The p-value stream of a fleet: every window (slot of 300 s) each of 50 models
submits one batch of 20 one-sided tests, so a window is 1,000 tests, and an
epoch (one UTC day) has 288 slots. Each batch goes through the real gate,
:class:`detectors.fdr.epoch.EpochSpending` (``capacity``, ``level`` and
``decide``, i.e. Benjamini-Hochberg at the BatchPRDS level), with the
service's bookkeeping: the slot's capacity derived from the fleet's
submissions (``capacity`` of the largest of this and the 7 previous epochs'
peak tests per slot: 1,250 for 1,000 tests a slot), ``granted`` = min(n,
capacity left in the slot), ``rewarded`` = the gate's discoveries in slots
<= s - ``reward_lag_slots`` (12) of the same epoch, all counters reset at
each epoch. alpha = q = 0.05.

Test statistics are z-scores, p = ``scipy.stats.norm.sf(z)``. Inside a batch
z_i = mu 1{non-null} + sqrt(rho) u + sqrt(1 - rho) e_i with e_i iid N(0, 1)
and u the model's factor, rho in {0, 0.3, 0.7}. For rho > 0 the factor is
AR(1) across windows, u_w = phi u_{w-1} + sqrt(1 - phi^2) eta_w (phi = 0.5,
``--phi``), always on: a model's batches are then positively correlated
across windows too, which BatchPRDS does not assume (it assumes independence
across batches), so the rho > 0 rows are a stress test. Non-null shift
``--mu`` (default 6: a lone non-null is found with probability ~0.8 at the
gate's base level, so a decaying level would show in the power; at mu = 7
even a 100-fold level decay would keep the power above 0.8 of its start).

One run is one simulated fleet week (2,016 windows = 7 epochs = 2.016e6
tests). Scenarios (one row per scenario and rho):

* ``global_null``: every test null. FDR = FWER = P(any discovery) per epoch.
* ``sparse_bursts``: null, plus ~2 bursts per day at random windows: one
  model's 20 tests all non-null for 3 consecutive windows. Power per burst
  (>= 1 discovery among the burst's tests during the burst) and the delay in
  windows from the burst's start to its first discovery.
* ``steady_1pct`` / ``steady_10pct``: each test non-null independently with
  probability 0.01 / 0.10 in every window; per-test power.

Every row also runs, on the same p-values, the naive policy (reject every
p < alpha, no FDR control).

Fleet shapes (no capacity is declared anywhere): ``global_null`` and
``sparse_bursts`` at rho = 0.3 for fleets of 1, 10, 1,000 and 10,000 models,
a fleet that grows from 10 to 1,000 models and one that shrinks from 1,000
to 10 (at noon of the second of 3 epochs). Per row: realized FDR against the
same criterion, the capacity of the first and last slot, the share of tests
that went unfunded (the growth slot's excess over 1.25 x the previous
peak), and a lone test's level at the end (what a fleet of that size gets).
Runs per row shrink with the fleet's size (a run costs ~1.2 s per epoch at
10,000 models), so the large fleets' SEs are wider; each row prints its own.

Guarantee tested
----------------
FDR <= q within every epoch (Zrnic, Jiang, Ramdas & Jordan, "The power of
batching in multiple hypothesis testing", AISTATS 2020: BatchPRDS; the
gate's level is derived in ``detectors/fdr/epoch.py``). Per row the criterion
is realized FDR <= q + 2.33 SE (SE of the mean FDP over the run-epochs).
And no alpha-death: the per-test power in the windows >= 1,000 (after 10^6
tests, from the 4th epoch on) is at least 0.8 of the power in the first 10
windows (steady rows). For contrast, LORD++ (``detectors/fdr/lord.py``, the
onlineFDR default gamma) as one global stream over tests shows the decay of
levels of the procedures that control FDR at every horizon (Ramdas, Yang,
Wainwright & Jordan, "Online control of the false discovery rate with
decaying memory", NeurIPS 2017): its level after 10^4 .. 2 10^5 tests of the
steady 1 % stream and after 10^4 .. 10^6 tests of a quiet (all-null) stream.

Exact speed-up under the null
-----------------------------
A batch can have a discovery only if its smallest p-value is <= its BH level
(BH rejects iff p_(k) <= k level / n for some k, and p_(1) <= p_(k)). The
level is ~3.5e-6, so almost no all-null batch qualifies. For a batch whose 20
tests are all null the simulator draws the maximum of the 20 idiosyncratic
normals directly: Phi(max e) = V^(1/20), V ~ U(0, 1) (computed as
sf(max e) = -expm1(log(V) / 20) for accuracy in the tail); max z =
sqrt(rho) u + sqrt(1 - rho) max e and min p = sf(max z). Only if min p <= level
are the other 19 drawn, iid N(0, 1) truncated below the max
(Phi^-1(W Phi(max e)), W ~ U(0, 1)), and the full batch goes through
``EpochSpending.decide``; otherwise the batch has no discovery, exactly. The
naive policy's count on such a batch, #{z_i > z_alpha}, is drawn from its exact
conditional law given the max: 1{max e > c} + Binomial(19, (Phi(max e) -
Phi(c)) / Phi(max e)) with c = (z_alpha - sqrt(rho) u) / sqrt(1 - rho). The
joint law of (gate decisions, naive count) is therefore that of brute-force
generation; ``tests/test_benchmarks_fdr_sim.py`` checks the two paths agree. Batches with
a non-null are generated in full.

Usage::

    python benchmarks/fdr_sim.py                 # 10,000 fleet-weeks (~2.5 min) + fleet shapes
    python benchmarks/fdr_sim.py --quick         # 600 fleet-weeks: ~20 s, shapes with few runs
    python benchmarks/fdr_sim.py --shapes-only   # the fleet-shape rows: ~2.5 min idle (329 s
                                                 # measured with the machine under load)
    python benchmarks/fdr_sim.py --runs 20000 --mu 7

Runtime is single-threaded (one core of a shared 2-core machine for the figures
above): ~11 ms per all-null fleet-week (100,800 batches), ~0.3 s per steady
1 % week and ~1.3 s per steady 10 % week, where most batches hold a non-null
and go through ``decide`` one by one. ``--runs`` is split 75/25 between the
``global_null`` and ``sparse_bursts`` rows, after 0.1 % (steady 1 %, at least
2) and 0.04 % (steady 10 %, at least 2) for each steady row. The fleet-shape
rows take the shares of ``--runs`` in ``SHAPES`` (2,000 runs of a one-model
fleet, 6 of a 10,000-model one at the default 10,000).

The last line printed is one JSON object: ``runs``, ``seconds``,
``scenarios`` (per row: ``fdr``, ``se``, ``p_any``, ``power``, the naive
policy's figures, ``pass``), ``shapes`` (per fleet-shape row, also
``unfunded_share``, ``capacity_first_last``, ``lone_test_level_last``),
``alpha_death`` and ``pass``.

Notes
-----
Under the global null P(any discovery in an epoch) <= sum of the batches'
base levels = alpha whatever the dependence across batches (the first
discovery of an epoch is made at a reward of 0, and BH under PRDS has FWER <=
its level under the global null); with independent tests it is
1 - (1 - alpha / (S N / n))^(S N / n) = 0.0488, which the rho = 0 row should
reproduce within its SE.

References
----------
.. [1] T. Zrnic, D. Jiang, A. Ramdas and M. I. Jordan, "The power of batching
   in multiple hypothesis testing", AISTATS 2020 (BatchPRDS).
.. [2] A. Ramdas, F. Yang, M. J. Wainwright and M. I. Jordan, "Online control
   of the false discovery rate with decaying memory", NeurIPS 2017
   (LORD++, alpha-death).
.. [3] Y. Benjamini and D. Yekutieli, "The control of the false discovery rate
   in multiple testing under dependency", Ann. Statist. 2001 (BH under PRDS).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy import special
from scipy.stats import norm

from detectors.fdr.epoch import EpochSpending
from detectors.fdr.lord import LordPlusPlus

RHOS = (0.0, 0.3, 0.7)
Z_SE = 2.33  # one-sided 99 %
EARLY_WINDOWS = 10
LATE_FROM_WINDOW = 1_000  # 10^6 tests of 1,000 per window
MIN_LATE_OVER_EARLY = 0.8


@dataclass(frozen=True)
class Fleet:
    """The fleet and the gate's parameters (defaults: the service's).

    ``shape`` makes the fleet grow or shrink: steps (from window, models), e.g.
    ``((0, 10), (432, 1000))``; empty: ``models`` in every window. The models
    present in a window are the first ones (a model that leaves takes its
    burst with it).
    """

    models: int = 50
    tests: int = 20  # per model and window: one batch
    alpha: float = 0.05
    slot_seconds: int = 300
    epoch_seconds: int = 86_400
    headroom: float = 1.25
    min_tests_per_slot: int = 20
    max_tests_per_slot: int | None = None
    reward_lag_slots: int = 12
    mu: float = 6.0
    phi: float = 0.5
    shape: tuple[tuple[int, int], ...] = ()

    def gate(self) -> EpochSpending:
        return EpochSpending(alpha=self.alpha, epoch_seconds=self.epoch_seconds,
                             slot_seconds=self.slot_seconds, headroom=self.headroom,
                             min_tests_per_slot=self.min_tests_per_slot,
                             max_tests_per_slot=self.max_tests_per_slot,
                             reward_lag_slots=self.reward_lag_slots)

    @property
    def most(self) -> int:
        """The largest number of models present in a window."""
        return max([self.models, *(m for _w, m in self.shape)])

    def models_at(self, w: int) -> int:
        """Models present in window ``w``."""
        out = self.models
        for start, m in self.shape:
            if w >= start:
                out = m
        return out


def capacities(fleet: Fleet, windows: int) -> np.ndarray:
    """Each window's slot capacity as the service derives it (``service.alerting.fdr``): at a
    slot's first batch, ``EpochSpending.capacity`` of the largest of this and the
    ``capacity_lookback_epochs`` previous epochs' peak tests per slot, and at least
    the batch's tests. The
    fleet's submissions do not depend on its p-values, so this is one sequence for
    every run.

    Examples
    --------
    >>> capacities(Fleet(models=1, tests=8, epoch_seconds=900), 3).tolist()  # the floor: 20
    [20, 20, 20]
    >>> f = Fleet(models=1, tests=8, epoch_seconds=900, shape=((1, 100),))
    >>> capacities(f, 7).tolist()  # grows in window 1; the next epoch remembers the peak
    [20, 20, 1000, 1000, 1000, 1000, 1000]
    """
    gate = fleet.gate()
    out = np.zeros(windows, dtype=np.int64)
    past: list[int] = []  # the previous epochs' peaks, newest last
    cur = 0
    for w in range(windows):
        if w % gate.slots == 0 and w:
            past = [*past, cur][-gate.capacity_lookback_epochs:]
            cur = 0
        out[w] = gate.capacity(max(*past, cur, fleet.tests))
        cur = max(cur, fleet.models_at(w) * fleet.tests)
    return out


@dataclass(frozen=True)
class Scenario:
    """One row: a stream of p-values at correlation ``rho``."""

    name: str
    rho: float = 0.0
    nonnull_rate: float = 0.0  # steady: per test and window
    bursts_per_day: float = 0.0
    burst_windows: int = 3

    @property
    def key(self) -> str:
        return f"{self.name}_rho{self.rho:g}"


@dataclass
class Tally:
    """What a scenario's runs produced."""

    runs: int = 0
    gate_fdp: list[np.ndarray] = field(default_factory=list)  # per run-epoch
    gate_any: list[np.ndarray] = field(default_factory=list)
    naive_fdp: list[np.ndarray] = field(default_factory=list)
    naive_any: list[np.ndarray] = field(default_factory=list)
    gate_disc: list[np.ndarray] = field(default_factory=list)  # discoveries per run-epoch
    naive_disc: list[np.ndarray] = field(default_factory=list)
    nonnull_w: np.ndarray | None = None  # per window, summed over runs
    gate_td_w: np.ndarray | None = None
    naive_td_w: np.ndarray | None = None
    gate_burst_delay: list[np.ndarray] = field(default_factory=list)  # -1: missed
    naive_burst_delay: list[np.ndarray] = field(default_factory=list)
    candidates: int = 0  # batches sent to decide
    batches: int = 0
    capacity_w: np.ndarray | None = None  # per window: the slot's capacity
    tests_w: np.ndarray | None = None  # per window: tests the fleet submits

    def cat(self, name: str) -> np.ndarray:
        parts = getattr(self, name)
        return np.concatenate(parts) if parts else np.zeros(0)


def pvalue(z: np.ndarray) -> np.ndarray:
    """One-sided p-value sf(z); ``scipy.special.ndtr(-z)`` is what ``scipy.stats.norm.sf(z)``
    computes (bit for bit, checked in the tests) without its argument handling."""
    return special.ndtr(-z)


def slot_grants(sizes: list[int], capacity: int) -> np.ndarray:
    """``granted`` of each batch of a slot, in submission order: min(n, capacity left)."""
    used, out = 0, []
    for n in sizes:
        g = min(n, capacity - used)
        used += g
        out.append(g)
    return np.array(out, dtype=np.int64)


def levels(gate: EpochSpending, n: int, grants: np.ndarray, rewarded: np.ndarray,
           capacity: int) -> np.ndarray:
    """(runs, models) BH levels from ``EpochSpending.level``, one call per distinct input."""
    ur, rinv = np.unique(rewarded, return_inverse=True)
    ug, ginv = np.unique(grants, return_inverse=True)
    table = np.array([[gate.level(n, int(g), int(r), capacity) for g in ug] for r in ur])
    return table[rinv][:, ginv]


def simulate(fleet: Fleet, sc: Scenario, runs: int, days: int, seed: int | list[int],
             brute: bool = False, block: int = 2_000) -> Tally:
    """Run ``runs`` independent fleet streams of ``days`` epochs each through the gate.

    ``brute`` generates every batch in full (no speed-up): for the equivalence test.
    """
    if not 0.0 <= sc.rho < 1.0:
        raise ValueError("rho must be in [0, 1)")
    gate = fleet.gate()
    windows = days * gate.slots
    tally = Tally(runs=runs)
    tally.nonnull_w = np.zeros(windows, dtype=np.int64)
    tally.gate_td_w = np.zeros(windows, dtype=np.int64)
    tally.naive_td_w = np.zeros(windows, dtype=np.int64)
    tally.capacity_w = capacities(fleet, windows)
    tally.tests_w = np.array([fleet.models_at(w) * fleet.tests for w in range(windows)])
    rng = np.random.default_rng(seed)
    done = 0
    while done < runs:
        b = min(block, runs - done)
        _block(fleet, sc, gate, b, windows, rng, brute, tally)
        done += b
    return tally


def _block(fleet: Fleet, sc: Scenario, gate: EpochSpending, nb: int, windows: int,
           rng: np.random.Generator, brute: bool, tally: Tally) -> None:
    m_, n, s_ = fleet.most, fleet.tests, gate.slots
    lag, alpha = gate.reward_lag_slots, fleet.alpha
    a, b = math.sqrt(sc.rho), math.sqrt(1.0 - sc.rho)
    innov = math.sqrt(1.0 - fleet.phi ** 2)
    z_alpha = float(norm.isf(alpha))
    # Every model present submits n tests per slot; the order inside a slot does not
    # matter (equal sizes), so the grants depend on the slot's capacity and fleet only.
    present = np.arange(m_)
    u = rng.standard_normal((nb, m_)) if sc.rho > 0 else np.zeros((nb, m_))
    disc = np.zeros((nb, s_), dtype=np.int64)  # gate discoveries per slot of the epoch
    rewarded = np.zeros(nb, dtype=np.int64)
    ep = np.zeros((4, nb), dtype=np.int64)  # gate D, gate V, naive D, naive V in the epoch
    left = np.zeros((nb, m_), dtype=np.int64)  # burst windows left
    b_start = np.zeros((nb, m_), dtype=np.int64)
    b_gate = np.full((nb, m_), -1, dtype=np.int64)  # window of first discovery
    b_naive = np.full((nb, m_), -1, dtype=np.int64)
    col = np.arange(n)
    everything = np.arange(nb * m_)

    def flush() -> None:
        tally.gate_fdp.append(ep[1] / np.maximum(ep[0], 1))
        tally.gate_any.append((ep[0] > 0).astype(np.float64))
        tally.naive_fdp.append(ep[3] / np.maximum(ep[2], 1))
        tally.naive_any.append((ep[2] > 0).astype(np.float64))
        tally.gate_disc.append(ep[0].copy())
        tally.naive_disc.append(ep[2].copy())
        ep[:] = 0

    for w in range(windows):
        s = w % s_
        if s == 0:
            if w:
                flush()
            disc[:] = 0
            rewarded[:] = 0
        elif s >= lag:
            rewarded += disc[:, s - lag]
        m_w, cap = fleet.models_at(w), int(tally.capacity_w[w])
        grants = np.where(present < m_w, np.clip(cap - n * present, 0, n), 0)  # slot_grants
        on = present < m_w  # (models,): present in this window
        level = levels(gate, n, grants, rewarded, cap)
        if sc.rho > 0 and w:
            u = fleet.phi * u + innov * rng.standard_normal((nb, m_))
        # non-null tests per batch (tests of a batch are exchangeable: the first k)
        if sc.nonnull_rate:
            k_nn = rng.binomial(n, sc.nonnull_rate, (nb, m_))
        elif sc.bursts_per_day:
            if w <= windows - sc.burst_windows:
                r = np.flatnonzero(rng.random(nb) < sc.bursts_per_day / s_)
                mm = rng.integers(m_w, size=r.size)
                free = left[r, mm] == 0
                r, mm = r[free], mm[free]
                left[r, mm], b_start[r, mm], b_gate[r, mm], b_naive[r, mm] = sc.burst_windows, w, -1, -1
            left[:, ~on] = 0  # a model that left ends its burst
            k_nn = np.where(left > 0, n, 0)
        else:
            k_nn = np.zeros((nb, m_), dtype=np.int64)
        k_nn[:, ~on] = 0

        # per batch (flat index j = run * models + model): gate D and V, naive D and V
        gate_d = np.zeros(nb * m_, dtype=np.int64)
        gate_v = np.zeros(nb * m_, dtype=np.int64)
        naive_d = np.zeros(nb * m_, dtype=np.int64)
        naive_v = np.zeros(nb * m_, dtype=np.int64)
        uf, lf, kf = u.ravel(), level.ravel(), k_nn.ravel()
        cand_j: list[np.ndarray] = []
        cand_z: list[np.ndarray] = []

        full = np.ones(nb * m_, dtype=bool) if brute else kf > 0
        n_full = int(full.sum())
        if n_full < full.size:  # all-null batches: the exact speed-up
            cj = everything if n_full == 0 else np.flatnonzero(~full)
            uc = uf if n_full == 0 else uf[cj]
            with np.errstate(divide="ignore"):
                log_v = np.log(rng.random(cj.size)) * (1.0 / n)
            sf_max = -np.expm1(log_v)  # P(e > max e) = 1 - V^(1/n)
            cdf_max = np.exp(log_v)  # Phi(max e) = V^(1/n)
            e_max = -special.ndtri(sf_max)
            z_max = a * uc + b * e_max if sc.rho else e_max
            cand = pvalue(z_max) <= (lf if n_full == 0 else lf[cj])
            # naive count #{z_i > z_alpha} given the max (overwritten below for candidates)
            c = (z_alpha - a * uc) / b if sc.rho else z_alpha
            above = e_max > c
            q = np.where(above, (special.ndtr(-c) - sf_max) / np.maximum(cdf_max, 1e-300), 0.0)
            k = above + rng.binomial(n - 1, np.clip(q, 0.0, 1.0))
            if n_full == 0:
                naive_d[:] = k
            else:
                naive_d[cj] = k
            ci = np.flatnonzero(cand)
            if ci.size:
                rest = special.ndtri(rng.random((ci.size, n - 1)) * cdf_max[ci, None])
                e = np.concatenate([e_max[ci, None], rest], axis=1)
                cand_j.append(cj[ci])
                cand_z.append(a * uc[ci, None] + b * e)
            naive_v[:] = naive_d  # so far only all-null batches have a count
        if n_full:  # batches with a non-null (or everything, brute force): in full
            fj = np.flatnonzero(full)
            nn = col < kf[fj, None]
            z = a * uf[fj, None] + b * rng.standard_normal((fj.size, n)) + fleet.mu * nn
            p = pvalue(z)
            hit = p < alpha
            naive_d[fj] = hit.sum(axis=1)
            naive_v[fj] = (hit & ~nn).sum(axis=1)
            ci = np.flatnonzero(p.min(axis=1) <= lf[fj])
            if ci.size:
                cand_j.append(fj[ci])
                cand_z.append(z[ci])
        if cand_j:
            cj = np.concatenate(cand_j)
            p = pvalue(np.concatenate(cand_z))
            nn = col < kf[cj, None]
            hit = p < alpha
            naive_d[cj] = hit.sum(axis=1)
            naive_v[cj] = (hit & ~nn).sum(axis=1)
            tally.candidates += cj.size
            for i, j in enumerate(cj.tolist()):
                found = gate.decide(p[i], granted=int(grants[j % m_]), rewarded=int(rewarded[j // m_]),
                                    capacity=cap)
                gate_d[j] = int(found.sum())
                gate_v[j] = int((found & ~nn[i]).sum())
        tally.batches += nb * m_w
        gate_d, gate_v = gate_d.reshape(nb, m_), gate_v.reshape(nb, m_)
        naive_d, naive_v = naive_d.reshape(nb, m_) * on, naive_v.reshape(nb, m_) * on

        d_run = gate_d.sum(axis=1)
        disc[:, s] = d_run
        ep[0] += d_run
        ep[1] += gate_v.sum(axis=1)
        ep[2] += naive_d.sum(axis=1)
        ep[3] += naive_v.sum(axis=1)
        tally.nonnull_w[w] += int(k_nn.sum())
        tally.gate_td_w[w] += int((gate_d - gate_v).sum())
        tally.naive_td_w[w] += int((naive_d - naive_v).sum())
        if sc.bursts_per_day:
            active = left > 0
            # discoveries among the burst's tests (all non-null): the true discoveries
            b_gate[active & (gate_d - gate_v > 0) & (b_gate < 0)] = w
            b_naive[active & (naive_d - naive_v > 0) & (b_naive < 0)] = w
            left[active] -= 1
            ended = active & (left == 0)
            if ended.any():
                st = b_start[ended]
                tally.gate_burst_delay.append(np.where(b_gate[ended] >= 0, b_gate[ended] - st, -1))
                tally.naive_burst_delay.append(np.where(b_naive[ended] >= 0, b_naive[ended] - st, -1))
    flush()


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    if x.size == 0:
        return float("nan"), float("nan")
    se = float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else float("nan")
    return float(x.mean()), se


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")


def summarize(fleet: Fleet, sc: Scenario, tally: Tally) -> dict:
    """A row's figures and its PASS/FAIL."""
    fdr, se = _mean_se(tally.cat("gate_fdp"))
    q = fleet.alpha
    bound = q + Z_SE * (se if math.isfinite(se) else 0.0)
    out: dict = {
        "runs": tally.runs, "epochs": int(tally.cat("gate_fdp").size),
        "fdr": fdr, "se": se, "bound": bound, "p_any": float(tally.cat("gate_any").mean()),
        "naive_fdr": float(tally.cat("naive_fdp").mean()),
        "naive_p_any": float(tally.cat("naive_any").mean()),
        "decide_calls_per_batch": tally.candidates / max(tally.batches, 1),
    }
    ok = fdr <= bound
    nn = tally.nonnull_w
    if nn.sum():
        out["power"] = _ratio(tally.gate_td_w.sum(), nn.sum())
        out["naive_power"] = _ratio(tally.naive_td_w.sum(), nn.sum())
        early, late = slice(0, EARLY_WINDOWS), slice(LATE_FROM_WINDOW, None)
        if nn[late].sum():
            for who in ("gate", "naive"):
                td = getattr(tally, f"{who}_td_w")
                e, lt = _ratio(td[early].sum(), nn[early].sum()), _ratio(td[late].sum(), nn[late].sum())
                pre = "" if who == "gate" else "naive_"
                out[f"{pre}early_power"], out[f"{pre}late_power"] = e, lt
                out[f"{pre}late_over_early"] = _ratio(lt, e)
            if sc.nonnull_rate:
                ok = ok and out["late_over_early"] >= MIN_LATE_OVER_EARLY
    if sc.bursts_per_day:
        for who in ("gate", "naive"):
            delay = tally.cat(f"{who}_burst_delay")
            pre = "" if who == "gate" else "naive_"
            out[f"{pre}burst_power"] = float((delay >= 0).mean()) if delay.size else float("nan")
            hit = delay[delay >= 0]
            out[f"{pre}delay_windows"] = float(hit.mean()) if hit.size else float("nan")
        out["bursts"] = int(tally.cat("gate_burst_delay").size)
    out["pass"] = bool(ok)
    return out


def lord_stream(p_values: np.ndarray, checkpoints: list[int], alpha: float) -> dict:
    """LORD++ over one stream: its ``next_level()`` after each checkpoint, and rejections.

    Exact shortcut: between two rejections LORD++'s level never increases (every
    term is gamma_{t - tau}, and the Javanmard-Montanari gamma_j decreases in j),
    so after a rejection ``next_level()`` bounds the levels until the next one. A
    p-value above that bound is not rejected, and ``test`` would only advance
    ``t``; the loop advances ``t`` itself instead of recomputing the level (a sum
    over all past rejections).
    """
    lord = LordPlusPlus(alpha=alpha)
    cap = lord.next_level()
    marks = sorted(c for c in checkpoints if c <= p_values.size)
    out: dict = {"levels": {}, "rejected": np.zeros(p_values.size, dtype=bool)}
    mi = 0
    for i, p in enumerate(p_values.tolist()):
        if p > cap:
            lord.t += 1
        elif lord.test(p):
            out["rejected"][i] = True
            cap = lord.next_level()
        while mi < len(marks) and marks[mi] == i + 1:
            out["levels"][marks[mi]] = lord.next_level()
            mi += 1
    return out


def lord_contrast(fleet: Fleet, steady_tests: int, null_tests: int, seed: int) -> dict:
    """LORD++ (onlineFDR default gamma, w0 = alpha / 10) as one global stream of tests."""
    rng = np.random.default_rng([seed, 99])
    nonnull = rng.random(steady_tests) < 0.01
    p = norm.sf(rng.standard_normal(steady_tests) + fleet.mu * nonnull)
    steady = lord_stream(p, [10_000, 100_000, 200_000, 1_000_000], fleet.alpha)
    quiet = lord_stream(norm.sf(rng.standard_normal(null_tests)), [10_000, 100_000, 1_000_000],
                        fleet.alpha)
    rej = steady["rejected"]
    early = slice(0, min(10_000, steady_tests))
    late = slice(min(100_000, steady_tests // 2), None)
    e = _ratio((rej & nonnull)[early].sum(), nonnull[early].sum())
    lt = _ratio((rej & nonnull)[late].sum(), nonnull[late].sum())
    return {"steady_levels": steady["levels"], "null_levels": quiet["levels"],
            "early_power": e, "late_power": lt, "late_over_early": _ratio(lt, e),
            "late_from_test": late.start}


def allocate(total: int) -> dict[str, int]:
    """Fleet-weeks per row out of ``total``: the steady rows (a python call per
    batch with a non-null) get a few, the null and burst rows the rest."""
    per_1 = max(2, round(total * 0.001))
    per_10 = max(2, round(total * 0.0004))
    rest = max(total - len(RHOS) * (per_1 + per_10), 2 * len(RHOS))
    per_null = max(1, round(rest * 0.75 / len(RHOS)))
    per_burst = max(1, round(rest * 0.25 / len(RHOS)))
    return {"global_null": per_null, "sparse_bursts": per_burst, "steady_1pct": per_1, "steady_10pct": per_10}


def scenarios() -> list[Scenario]:
    out = []
    for name, kw in (("global_null", {}), ("sparse_bursts", {"bursts_per_day": 2.0}),
                     ("steady_1pct", {"nonnull_rate": 0.01}), ("steady_10pct", {"nonnull_rate": 0.10})):
        out += [Scenario(name, rho, **kw) for rho in RHOS]
    return out


# Fleet shapes (rows at rho 0.3, 3 epochs per run; the shape changes at noon of the second
# epoch) and their share of the fleet-weeks' worth of runs: a run's cost grows with the
# largest fleet, so the large fleets get fewer runs (wider SE, stated per row).
SHAPE_DAYS = 3
SHAPE_RHO = 0.3
CHANGE_WINDOW = 288 + 144
SHAPES: dict[str, tuple[Fleet, float]] = {
    "1_model": (Fleet(models=1), 0.2),
    "10_models": (Fleet(models=10), 0.1),
    "1000_models": (Fleet(models=1_000), 0.004),
    "10000_models": (Fleet(models=10_000), 0.0006),
    "grow_10_to_1000": (Fleet(models=10, shape=((CHANGE_WINDOW, 1_000),)), 0.004),
    "shrink_1000_to_10": (Fleet(models=1_000, shape=((CHANGE_WINDOW, 10),)), 0.004),
}


def shape_rows(total: int, seed: int, mu: float, phi: float) -> dict[str, dict]:
    """The fleet-shape rows: the derived capacity keeps FDR <= q for any fleet size and
    while the fleet grows or shrinks."""
    rows: dict[str, dict] = {}
    for i, (name, (base, share)) in enumerate(SHAPES.items()):
        fleet = Fleet(**{**base.__dict__, "mu": mu, "phi": phi})
        for j, sc in enumerate((Scenario("global_null", SHAPE_RHO),
                                Scenario("sparse_bursts", SHAPE_RHO, bursts_per_day=2.0))):
            runs = max(2, round(total * share))
            t1 = time.perf_counter()
            tally = simulate(fleet, sc, runs, SHAPE_DAYS, [seed, 1_000 + 10 * i + j])
            row = summarize(fleet, sc, tally)
            tests, cap = tally.tests_w, tally.capacity_w
            row["unfunded_share"] = float(np.maximum(tests - cap, 0).sum() / tests.sum())
            row["capacity_first_last"] = [int(cap[0]), int(cap[-1])]
            row["lone_test_level_last"] = fleet.gate().level(fleet.tests, fleet.tests, 0,
                                                             int(cap[-1])) / fleet.tests
            row["fleet"], row["scenario"] = name, sc.name
            rows[f"{name}_{sc.key}"] = row
            print(f"  {name} {sc.key}: {runs} runs in {time.perf_counter() - t1:.1f} s, FDR "
                  f"{row['fdr']:.4f} -> {'PASS' if row['pass'] else 'FAIL'}", flush=True)
    return rows


def print_shapes(rows: dict[str, dict]) -> None:
    print(f"\n== fleet shapes (rho {SHAPE_RHO:g}, {SHAPE_DAYS} epochs per run, change at window "
          f"{CHANGE_WINDOW}) ==")
    print(f"{'fleet':>18} {'scenario':>13} {'runs':>5} {'epochs':>6} | {'capacity':>13} {'unfunded':>8} "
          f"{'lone level':>10} | {'FDR':>7} {'(SE)':>8} {'P(any)':>7} {'burst_pow':>9} | criterion")
    for r in rows.values():
        cap = "{}->{}".format(*r["capacity_first_last"])
        print(f"{r['fleet']:>18} {r['scenario']:>13} {r['runs']:>5} {r['epochs']:>6} | {cap:>13} "
              f"{r['unfunded_share']:>8.5f} {r['lone_test_level_last']:>10.2e} | {_f(r['fdr'], '7.4f')} "
              f"({_f(r['se'], '.4f')}) {_f(r['p_any'], '7.4f')} {_f(r.get('burst_power'), '9.4f')} | "
              f"{'PASS' if r['pass'] else 'FAIL'} (FDR <= {r['bound']:.4f})")


def _f(x: float | None, fmt: str = ".4f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def print_tables(rows: dict[str, dict], scs: list[Scenario]) -> None:
    for name in dict.fromkeys(sc.name for sc in scs):
        print(f"\n== {name} ==")
        extra = {"sparse_bursts": "  burst_pow  delay_w", "global_null": ""}.get(name, "  power  late/early")
        print(f"{'rho':>4} {'runs':>6} {'epochs':>6} | {'gate FDR':>8} {'(SE)':>8} {'P(any)':>7}{extra} "
              f"| {'naive FDR':>9} {'P(any)':>7}{extra} | criterion")
        for sc in scs:
            if sc.name != name:
                continue
            r = rows[sc.key]
            if name == "sparse_bursts":
                g = f"  {_f(r['burst_power'], '9.4f')}  {_f(r['delay_windows'], '7.3f')}"
                nv = f"  {_f(r['naive_burst_power'], '9.4f')}  {_f(r['naive_delay_windows'], '7.3f')}"
            elif name == "global_null":
                g = nv = ""
            else:
                g = f"  {_f(r['power'], '5.3f')}  {_f(r.get('late_over_early'), '10.3f')}"
                nv = f"  {_f(r['naive_power'], '5.3f')}  {_f(r.get('naive_late_over_early'), '10.3f')}"
            crit = f"FDR <= {r['bound']:.4f}"
            if "late_over_early" in r and sc.nonnull_rate:
                crit += f", late/early >= {MIN_LATE_OVER_EARLY}"
            print(f"{sc.rho:>4g} {r['runs']:>6} {r['epochs']:>6} | {_f(r['fdr'], '8.4f')} "
                  f"({_f(r['se'], '.4f')}) {_f(r['p_any'], '7.4f')}{g} | {_f(r['naive_fdr'], '9.4f')} "
                  f"{_f(r['naive_p_any'], '7.4f')}{nv} | {'PASS' if r['pass'] else 'FAIL'} ({crit})")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=None,
                    help="total fleet-weeks over all rows (default 10,000; 600 with --quick)")
    ap.add_argument("--quick", action="store_true", help="600 fleet-weeks and a short LORD++ stream")
    ap.add_argument("--days", type=int, default=7,
                    help="epochs (days) per run; >= 4 for the alpha-death check")
    ap.add_argument("--mu", type=float, default=6.0, help="non-null z shift")
    ap.add_argument("--phi", type=float, default=0.5, help="AR(1) coefficient of the model factor (rho > 0)")
    ap.add_argument("--lord-tests", type=int, default=None,
                    help="LORD++ steady stream (default 2e5; 2e4 quick)")
    ap.add_argument("--lord-null-tests", type=int, default=None,
                    help="LORD++ all-null stream (default 1e6; 1e5 quick)")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--no-shapes", action="store_true", help="skip the fleet-shape rows")
    ap.add_argument("--shapes-only", action="store_true",
                    help="only the fleet-shape rows (and no LORD++ contrast)")
    args = ap.parse_args(argv)
    total = args.runs if args.runs is not None else (600 if args.quick else 10_000)
    lord_tests = args.lord_tests if args.lord_tests is not None else (20_000 if args.quick else 200_000)
    lord_null = args.lord_null_tests if args.lord_null_tests is not None else (
        100_000 if args.quick else 1_000_000)
    fleet = Fleet(mu=args.mu, phi=args.phi)
    gate = fleet.gate()
    capacity = gate.capacity(fleet.models * fleet.tests)
    base = gate.level(fleet.tests, fleet.tests, 0, capacity)
    print(f"fleet: {fleet.models} models x {fleet.tests} tests per {fleet.slot_seconds} s window, "
          f"derived capacity {capacity} (headroom {fleet.headroom:g}), {gate.slots} slots per epoch, "
          f"alpha = q = {fleet.alpha}, "
          f"reward lag {fleet.reward_lag_slots} slots; mu = {fleet.mu:g}, AR(1) phi = {fleet.phi:g}; "
          f"one run = {args.days} epochs", flush=True)
    print(f"gate: batch level {base:.3e} with no reward (a lone p-value needs <= {base / fleet.tests:.3e})",
          flush=True)
    t0 = time.perf_counter()
    if args.shapes_only:
        shapes = shape_rows(total, args.seed, args.mu, args.phi)
        print_shapes(shapes)
        ok = all(r["pass"] for r in shapes.values())
        seconds = round(time.perf_counter() - t0, 1)
        print(f"\n{'PASS' if ok else 'FAIL'}: {sum(r['pass'] for r in shapes.values())}/{len(shapes)} "
              f"fleet-shape rows in {seconds} s")
        result = {"seconds": seconds, "shapes": shapes, "pass": ok}
        print(json.dumps(result, default=float))
        return result
    plan = allocate(total)
    scs = scenarios()
    rows: dict[str, dict] = {}
    for i, sc in enumerate(scs):
        t1 = time.perf_counter()
        tally = simulate(fleet, sc, plan[sc.name], args.days, [args.seed, i])
        rows[sc.key] = summarize(fleet, sc, tally)
        print(f"  {sc.key}: {plan[sc.name]} runs in {time.perf_counter() - t1:.1f} s, FDR "
              f"{rows[sc.key]['fdr']:.4f} -> {'PASS' if rows[sc.key]['pass'] else 'FAIL'}", flush=True)
    shapes = shape_rows(total, args.seed, args.mu, args.phi) if not args.no_shapes else {}
    t1 = time.perf_counter()
    lord = lord_contrast(fleet, lord_tests, lord_null, args.seed)
    print(f"  LORD++ streams ({lord_tests} + {lord_null} tests) in {time.perf_counter() - t1:.1f} s",
          flush=True)
    print_tables(rows, scs)
    if shapes:
        print_shapes(shapes)

    ref = rows["steady_1pct_rho0"]
    alpha_death = {
        "scenario": "steady_1pct_rho0",
        "early_power": ref.get("early_power"), "late_power": ref.get("late_power"),
        "late_over_early": ref.get("late_over_early"),
        "min_late_over_early_all_steady": min(
            (r["late_over_early"] for k, r in rows.items()
             if k.startswith("steady") and "late_over_early" in r), default=None),
        "naive_late_over_early": ref.get("naive_late_over_early"),
        "gate_lone_test_level": base / fleet.tests,
        "lord_level_at_1e4": lord["steady_levels"].get(10_000),
        "lord_level_at_1e5": lord["steady_levels"].get(100_000),
        "lord_level_at_2e5": lord["steady_levels"].get(200_000),
        "lord_late_over_early": lord["late_over_early"],
        "lord_null_level_at_1e4": lord["null_levels"].get(10_000),
        "lord_null_level_at_1e5": lord["null_levels"].get(100_000),
        "lord_null_level_at_1e6": lord["null_levels"].get(1_000_000),
    }
    alpha_ok = bool(ref.get("late_over_early") is not None and ref["late_over_early"] >= MIN_LATE_OVER_EARLY)
    print("\n== alpha-death (steady_1pct, rho 0) ==")
    print(f"gate : per-test power first {EARLY_WINDOWS} windows {_f(ref.get('early_power'))}, "
          f"windows >= {LATE_FROM_WINDOW} {_f(ref.get('late_power'))}, late/early "
          f"{_f(ref.get('late_over_early'), '.3f')} -> {'PASS' if alpha_ok else 'FAIL'} "
          f"(>= {MIN_LATE_OVER_EARLY})")
    print(f"naive: late/early {_f(ref.get('naive_late_over_early'), '.3f')}")
    print(f"LORD++ steady 1% stream ({lord_tests} tests): level "
          + ", ".join(f"{_f(v, '.2e')} after {k:.0e}" for k, v in lord["steady_levels"].items())
          + f"; power first 1e4 tests {_f(lord['early_power'], '.3f')}, from test {lord['late_from_test']} "
          f"{_f(lord['late_power'], '.3f')}")
    print(f"LORD++ all-null stream ({lord_null} tests): level "
          + ", ".join(f"{_f(v, '.2e')} after {k:.0e}" for k, v in lord["null_levels"].items())
          + f"  (gate: a lone test's level {base / fleet.tests:.2e} at the start of every epoch)")

    ok = all(r["pass"] for r in (*rows.values(), *shapes.values())) and alpha_ok
    seconds = round(time.perf_counter() - t0, 1)
    print(f"\n{'PASS' if ok else 'FAIL'}: {sum(r['pass'] for r in rows.values())}/{len(rows)} rows, "
          f"{sum(r['pass'] for r in shapes.values())}/{len(shapes)} fleet-shape rows, "
          f"alpha-death {'PASS' if alpha_ok else 'FAIL'}; {sum(r['runs'] for r in rows.values())} runs "
          f"in {seconds} s")

    def clean(x):
        if isinstance(x, np.generic):
            x = x.item()
        if isinstance(x, float):
            return None if math.isnan(x) else round(x, 6) if abs(x) >= 1e-4 or x == 0 else float(f"{x:.4e}")
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        return x

    result = clean({
        "runs": sum(r["runs"] for r in rows.values()),
        "seconds": seconds,
        "run": f"{args.days} epochs x {gate.slots} windows x {fleet.models * fleet.tests} tests",
        "mu": fleet.mu, "phi": fleet.phi, "alpha": fleet.alpha,
        "scenarios": rows,
        "shapes": shapes,
        "alpha_death": alpha_death,
        "pass": ok,
    })
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
