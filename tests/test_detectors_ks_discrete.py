"""KS on discrete data (exact counts with ties): calibrated by the law at the atoms, where the
Kolmogorov law (the supremum over a continuum) alarmed in ~1 % of H0 pairs at alpha = 0.05."""

from __future__ import annotations

import numpy as np
from scipy import special, stats

from detectors.drift.ks import ks_test
from detectors.result import Status
from detectors.stats.bridge_max import bridge_max_sf
from sketches.numeric import NumericSketch


def _exact(values: np.ndarray) -> NumericSketch:
    s = NumericSketch()
    s.update(values.astype(np.float64))
    assert s.is_exact
    return s


def test_false_alarm_rate_of_ks_on_a_poisson_feature_is_near_alpha():
    rng = np.random.default_rng(7)
    pairs = 1_500
    alarms = sum(
        ks_test(_exact(rng.poisson(4, 1_000)), _exact(rng.poisson(4, 1_000))).status == Status.DRIFT
        for _ in range(pairs))
    rate = alarms / pairs
    assert 0.03 <= rate <= 0.07, rate  # the Kolmogorov law gave 0.011 here


def test_law_at_the_atoms_matches_simulated_bridges_and_is_below_kolmogorov():
    rng = np.random.default_rng(0)
    u = np.cumsum(stats.poisson(4).pmf(np.arange(12)))
    steps = rng.normal(size=(100_000, u.size)) * np.sqrt(np.diff(u, prepend=0.0))
    w = np.cumsum(steps, axis=1)
    w1 = w[:, -1:] + rng.normal(size=(w.shape[0], 1)) * np.sqrt(1.0 - u[-1])
    largest = np.abs(w - u * w1).max(axis=1)  # B(u) = W(u) - u W(1)
    for c in (1.0, 1.36, 1.6):
        simulated = float((largest >= c).mean())
        assert abs(bridge_max_sf(c, u) - simulated) < 4 * np.sqrt(simulated / w.shape[0]) + 1e-3
        assert bridge_max_sf(c, u) < special.kolmogorov(c) / 2.5


def test_a_shifted_discrete_feature_is_still_drift():
    rng = np.random.default_rng(2)
    r = ks_test(_exact(rng.poisson(4, 5_000)), _exact(rng.poisson(4.3, 5_000)))
    assert r.status == Status.DRIFT and r.p_value < 1e-6
