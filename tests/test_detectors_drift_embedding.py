"""The vector (embedding) checks against textbook computations on the raw vectors, their edge
cases, and their path through the suite."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from detectors.catalog import VECTOR_CHECKS
from detectors.drift.embedding.centroid import centroid_distances, centroid_shift_test
from detectors.drift.embedding.mmd import mmd_test
from detectors.drift.embedding.projections import _projection_p, cauchy_combination, merged_bins
from detectors.result import Status
from detectors.suite import evaluate_window
from sdk.columns import RecordColumns
from sketches.profile import WindowProfile
from sketches.vector import VectorProfile

VECTOR = sorted(VECTOR_CHECKS)
DISTRIBUTION = [c for c in VECTOR if c != "null_rate"]


def profile(x: np.ndarray, tag: str = "p") -> VectorProfile:
    p = VectorProfile(x.shape[1])
    for s in range(0, len(x), 500):
        part = x[s:s + 500]
        p.update(part, [f"{tag}{s + i}" for i in range(len(part))])
    return p


def test_hotelling_matches_the_textbook_t2_on_the_raw_vectors():
    """8 dimensions (kept whole): T² and F from numpy's covariances of the raw vectors, the
    p-value from scipy's F law. Tolerance 1e-9: the same sums in another order."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((700, 8)) @ rng.standard_normal((8, 8))
    b = rng.standard_normal((300, 8)) @ rng.standard_normal((8, 8)) * 0.2 + a.mean(0) + 0.05
    r = centroid_shift_test(profile(a), profile(b))
    n1, n2, k = len(a), len(b), 8
    s = ((n1 - 1) * np.cov(a.T) + (n2 - 1) * np.cov(b.T)) / (n1 + n2 - 2)
    d = b.mean(0) - a.mean(0)
    t2 = n1 * n2 / (n1 + n2) * d @ np.linalg.solve(s, d)
    f = (n1 + n2 - k - 1) / (k * (n1 + n2 - 2)) * t2
    assert r.statistic == pytest.approx(t2, rel=1e-9)
    assert r.effect_size == pytest.approx(np.sqrt(d @ np.linalg.solve(s, d)), rel=1e-9)
    assert r.p_value == pytest.approx(stats.f.sf(f, k, n1 + n2 - k - 1), rel=1e-6, abs=1e-300)
    euclid, cosine = centroid_distances(profile(a), profile(b))
    assert euclid == pytest.approx(np.linalg.norm(d), rel=1e-9)
    assert cosine == pytest.approx(1 - a.mean(0) @ b.mean(0) / np.linalg.norm(a.mean(0))
                                   / np.linalg.norm(b.mean(0)), rel=1e-9)
    assert "cosine distance" in r.reason


def test_hotelling_interval_null_is_the_noncentral_f_at_the_floor():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2000, 6)), rng.standard_normal((2000, 6)) + 0.1
    point = centroid_shift_test(profile(a), profile(b))
    at_floor = centroid_shift_test(profile(a), profile(b), floor=0.2)
    n = 2000 * 2000 / 4000
    f = (4000 - 6 - 1) / (6 * 3998) * point.statistic
    assert at_floor.p_value == pytest.approx(stats.ncf.sf(f, 6, 4000 - 7, n * 0.04), rel=1e-9)
    assert point.status == Status.DRIFT and at_floor.status == Status.OK  # D ~ 0.24, not above 0.2


def test_hotelling_on_a_degenerate_subspace_uses_its_rank():
    """Vectors in a 3-dimensional subspace of 40: the test runs on rank 3, not 32."""
    rng = np.random.default_rng(3)
    basis = rng.standard_normal((3, 40))
    a, b = rng.standard_normal((500, 3)) @ basis, rng.standard_normal((500, 3)) @ basis
    r = centroid_shift_test(profile(a), profile(b))
    assert "rank 3" in r.reason and r.status == Status.OK


def test_mmd_matches_the_unbiased_estimate_on_the_raw_samples():
    """200 + 150 vectors of 5 dimensions: the samples hold every vector, so MMD²_u from the
    kernel of the raw vectors (Gretton et al. 2012, eq. 3) is the statistic (float32 sample)."""
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((200, 5)), rng.standard_normal((150, 5)) + 0.3
    r = mmd_test(profile(x), profile(y))
    xs, ys = x.astype(np.float32).astype(np.float64), y.astype(np.float32).astype(np.float64)
    z = np.concatenate([xs, ys])
    d2 = ((z[:, None, :] - z[None, :, :]) ** 2).sum(-1)
    k = np.exp(-d2 / np.median(d2[np.triu_indices(len(z), 1)]))
    kxx, kyy, kxy = k[:200, :200], k[200:, 200:], k[:200, 200:]
    expected = ((kxx.sum() - np.trace(kxx)) / (200 * 199) + (kyy.sum() - np.trace(kyy)) / (150 * 149)
                - 2 * kxy.mean())
    assert r.statistic == pytest.approx(expected, rel=1e-9)
    assert r.status == Status.DRIFT and r.p_value == pytest.approx(1 / 201)
    assert mmd_test(profile(x), profile(y)).p_value == r.p_value  # seeded: the same answer


def test_projection_p_is_pearsons_chi_square_on_the_merged_bins():
    rng = np.random.default_rng(5)
    ref, cur = rng.multinomial(5000, np.full(64, 1 / 64)), rng.multinomial(400, np.full(64, 1 / 64))
    a, b = merged_bins(ref, cur)
    assert a.sum() == 5000 and b.sum() == 400 and a.size < 64
    assert (400 * (a + b) / 5400 >= 5 - 1e-9).all()
    expected = stats.chi2_contingency(np.vstack([a, b]), correction=False).pvalue
    assert _projection_p(ref, cur, 0.0)[0] == pytest.approx(expected, rel=1e-9)


def test_cauchy_combination_of_equal_and_of_one_tiny_p():
    assert cauchy_combination(np.full(32, 0.2)) == pytest.approx(0.2)
    assert cauchy_combination(np.r_[1e-12, np.full(31, 0.5)]) == pytest.approx(32e-12, rel=1e-3)
    assert cauchy_combination(np.ones(4)) == 1.0


@pytest.mark.parametrize("check", DISTRIBUTION)
def test_same_distribution_is_ok_and_a_moved_one_drifts(check):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3000, 50)), rng.standard_normal((1000, 50))
    moved = b * 1.5 + 0.3
    f = VECTOR_CHECKS[check]
    same = f(profile(a, "a"), profile(b, "b"))
    assert same.status == Status.OK and same.p_value > 0.01
    assert f(profile(a, "a"), profile(moved, "m")).status == Status.DRIFT


@pytest.mark.parametrize("check", VECTOR)
def test_few_vectors_are_insufficient_data_and_other_dimensions_refused(check):
    rng = np.random.default_rng(7)
    f = VECTOR_CHECKS[check]
    many, few = profile(rng.standard_normal((500, 10))), profile(rng.standard_normal((5, 10)))
    assert f(many, few).status == Status.INSUFFICIENT_DATA
    assert f(VectorProfile(10), many).status == Status.INSUFFICIENT_DATA
    with pytest.raises(ValueError, match="dimension"):
        f(many, profile(rng.standard_normal((500, 11))))


@pytest.mark.parametrize("check", VECTOR)
def test_constant_vectors_never_give_nan(check):
    f = VECTOR_CHECKS[check]
    same = f(profile(np.ones((300, 12))), profile(np.ones((200, 12))))
    assert same.status == Status.OK and same.p_value == 1.0
    f(profile(np.ones((300, 12))), profile(np.full((200, 12), 2.0)))  # a finite result (or drift)


def test_a_rise_of_missing_vectors_is_a_null_rate_change_and_a_fall_is_not():
    rng = np.random.default_rng(9)
    ref, cur = profile(rng.standard_normal((2000, 6))), profile(rng.standard_normal((700, 6)))
    ref.add_nulls(20)
    cur.add_nulls(300)
    r = VECTOR_CHECKS["null_rate"](ref, cur)
    assert r.status == Status.DRIFT and r.effect_size == pytest.approx(300 / 1000 - 20 / 2020)
    assert VECTOR_CHECKS["null_rate"](cur, ref).status == Status.OK


def test_a_moved_constant_is_a_certain_centroid_shift():
    r = centroid_shift_test(profile(np.ones((300, 12))), profile(np.full((200, 12), 2.0)))
    assert r.status == Status.DRIFT and r.p_value == 0.0


def test_the_suite_runs_the_vector_checks_of_a_baselines_vector_feature():
    rng = np.random.default_rng(8)

    def window(x: np.ndarray, tag: str) -> WindowProfile:
        p = WindowProfile("m", 0, 300)
        n = len(x)
        cols = RecordColumns("m", ["1"] * n, [f"{tag}{i}" for i in range(n)], [0.0] * n, {"s": [1.0] * n})
        cols.vectors = {"emb": [v.tobytes() for v in x.astype("<f4")]}
        p.add_columns(cols)
        return p

    base, cur = window(rng.standard_normal((2000, 20)), "b"), window(rng.standard_normal((500, 20)) + 1, "c")
    results = {r.check: r for r in evaluate_window(cur, base) if r.feature == "emb"}
    assert set(results) == set(VECTOR)
    assert results["centroid_shift"].status == Status.DRIFT
    other = window(rng.standard_normal((500, 21)), "o")
    statuses = {r.status for r in evaluate_window(other, base) if r.feature == "emb"}
    assert statuses == {Status.INSUFFICIENT_DATA}
    empty = WindowProfile("m", 0, 300)
    ids = [f"e{i}" for i in range(50)]
    empty.add_columns(RecordColumns("m", ["1"] * 50, ids, [0.0] * 50, {"s": [1.0] * 50}))
    missing = {r.check: r for r in evaluate_window(empty, base) if r.feature == "emb"}
    assert missing["null_rate"].status == Status.DRIFT and missing["null_rate"].effect_size == 1.0
    assert all(r.status == Status.INSUFFICIENT_DATA for c, r in missing.items() if c != "null_rate")
