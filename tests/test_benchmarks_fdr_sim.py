"""benchmarks/fdr_sim.py: its exact speed-ups agree with brute force, and a tiny run of
its main separates the FDR gate from the naive policy (seconds)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from detectors.fdr.lord import LordPlusPlus

ALPHA = 0.05


@pytest.fixture(scope="module")
def sim():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "fdr_sim.py"
    spec = importlib.util.spec_from_file_location("fdr_sim", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_pvalue_is_norm_sf(sim):
    z = np.random.default_rng(1).normal(0.0, 5.0, 10_000)
    assert np.array_equal(sim.pvalue(z), norm.sf(z))


def test_slot_grants_cap_the_slot(sim):
    assert sim.slot_grants([20] * 50, 1000).tolist() == [20] * 50
    assert sim.slot_grants([300, 300, 300, 300], 1000).tolist() == [300, 300, 300, 100]


@pytest.mark.parametrize("rho", [0.0, 0.7])
def test_null_speedup_matches_brute_force(sim, rho):
    # A setting where the gate discovers often: 4 slots per epoch, alpha 0.5, a
    # capacity of 100 tests, so a batch's level is ~0.025 (x the reward).
    fleet = sim.Fleet(models=5, tests=20, alpha=0.5, epoch_seconds=1200, slot_seconds=300,
                      min_tests_per_slot=100, max_tests_per_slot=100, reward_lag_slots=1)
    scenario = sim.Scenario("global_null", rho)
    fast = sim.simulate(fleet, scenario, runs=1500, days=2, seed=[7, 1])
    brute = sim.simulate(fleet, scenario, runs=1500, days=2, seed=[7, 2], brute=True)
    assert fast.candidates < brute.batches  # the fast path skipped batches
    for name in ("gate_any", "gate_disc", "naive_disc"):
        x, y = fast.cat(name).astype(float), brute.cat(name).astype(float)
        se = np.sqrt(x.var() / x.size + y.var() / y.size)
        assert abs(x.mean() - y.mean()) < 4 * se, (name, x.mean(), y.mean(), se)
    assert 0.2 < fast.cat("gate_any").mean() < 0.9  # discoveries are common here
    # distribution of the gate's discoveries per epoch: 0, 1, 2, 3+
    fx, bx = (np.bincount(np.minimum(t.cat("gate_disc"), 3), minlength=4) / t.cat("gate_disc").size
              for t in (fast, brute))
    assert np.abs(fx - bx).max() < 0.05, (fx, bx)


def test_capacity_follows_the_fleet_and_shapes_stay_below_q(sim):
    # Capacity = ceil(1.25 x the largest of this and the 7 previous epochs' peaks): a fleet
    # that grows is sized from its next slot on, one that shrinks keeps the peak a week.
    fleet = sim.Fleet(models=10, tests=20, epoch_seconds=1_500, shape=((2, 100), (7, 10)))
    # (the very first slot knows only its first batch, 20 tests: ceil(1.25 x 20))
    assert sim.capacities(fleet, 15).tolist() == [25, 250, 250] + [2_500] * 12
    assert sim.capacities(sim.Fleet(models=1, tests=20), 3).tolist() == [25] * 3
    one = sim.Fleet(models=1, tests=20)
    tally = sim.simulate(one, sim.Scenario("global_null", 0.3), runs=300, days=2, seed=[3, 1])
    row = sim.summarize(one, sim.Scenario("global_null", 0.3), tally)
    # a lone model spends its own budget: P(any discovery) per epoch ~ 0.8 q, not ~0
    assert 0.015 < row["p_any"] < 0.08 and row["pass"]


def test_lord_stream_shortcut_is_exact(sim):
    rng = np.random.default_rng(3)
    nonnull = rng.random(5_000) < 0.02
    p = norm.sf(rng.standard_normal(5_000) + 4.0 * nonnull)
    out = sim.lord_stream(p, [1_000, 5_000], ALPHA)
    lord, rejected = LordPlusPlus(alpha=ALPHA), []
    for x in p:
        rejected.append(lord.test(float(x)))
    assert out["rejected"].tolist() == rejected
    assert any(rejected)
    assert out["levels"][5_000] == lord.next_level()


def test_main_tiny(sim, capsys):
    result = sim.main(["--runs", "30", "--days", "4", "--lord-tests", "20000",
                       "--lord-null-tests", "20000", "--seed", "5", "--no-shapes"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last) == result
    rows = result["scenarios"]
    null = [rows[f"global_null_rho{r}"] for r in ("0", "0.3", "0.7")]
    # global null: FDR = P(any discovery) per epoch; the gate's is ~alpha, the naive policy's ~1
    assert np.mean([r["p_any"] for r in null]) < 0.2
    assert all(r["naive_p_any"] == 1.0 and r["naive_fdr"] > ALPHA for r in null)
    for key in ("steady_1pct_rho0", "steady_10pct_rho0.3"):
        assert rows[key]["power"] > 0.5
        assert rows[key]["fdr"] < ALPHA < rows[key]["naive_fdr"]
    assert rows["sparse_bursts_rho0"]["burst_power"] > 0.5
    assert result["alpha_death"]["late_over_early"] >= 0.8
    # LORD++ starves on a quiet stream: below the gate's level after 2e4 tests
    assert result["alpha_death"]["lord_null_level_at_1e4"] < result["alpha_death"]["gate_lone_test_level"]
    assert result["runs"] == sum(r["runs"] for r in rows.values())
