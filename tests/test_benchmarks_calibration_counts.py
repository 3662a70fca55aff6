"""benchmarks/calibration_counts.py: H0 windows drawn as the statistics the tests read have the
law of windows built from raw values (the many-pair cells of benchmarks/calibration.py rest on it).

The structural parts are checked exactly (the edge ranks are numpy's, a reference's counts are
what its own values give in its own edges, a discrete sketch built from counts is the one its
values give, the binned tests read neither the moments nor the digest); the drawn parts by
comparing laws over a few hundred seeded pairs against raw draws.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from detectors.drift.js import js_test
from detectors.drift.ks import ks_test
from detectors.drift.psi import psi
from detectors.drift.wasserstein import wasserstein_test
from sketches.bins import BinCounts, derive_edges
from sketches.numeric import MAX_EXACT_VALUES, NumericSketch
from sketches.tdigest import TDigest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
N = 3_000  # past MAX_EXACT_VALUES: digest mode, the binned path
BINNED_TESTS = (("ks", ks_test), ("psi", psi), ("js", js_test), ("wasserstein", wasserstein_test))


@pytest.fixture(scope="module")
def cc():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("calibration_counts")
    finally:
        sys.path.remove(str(BENCHMARKS))


def _raw(values: np.ndarray, bins: BinCounts) -> NumericSketch:
    s = NumericSketch.binned(bins)
    s.update(values)
    return s


def test_edge_ranks_are_the_ranks_derive_edges_takes(cc) -> None:
    """For every n up to 3,000 and a few large ones, the ranks are numpy's inverted-CDF indices,
    and a reference's own values give its edges at those ranks and its counts as their gaps."""
    for n in [*range(1, 3_001), 99_991, 1_000_000]:
        ranks = np.arange(1, n + 1, dtype=np.float64)
        expected = np.unique(np.quantile(ranks, np.arange(1, 100) / 100, method="inverted_cdf"))
        assert np.array_equal(cc.edge_ranks(n), expected.astype(np.int64)), n
    x = np.random.default_rng(0).normal(size=N)
    r = cc.edge_ranks(N)
    edges = derive_edges(x)
    assert np.array_equal(edges, np.sort(x)[r - 1])
    bins = BinCounts(edges, source=True)
    bins.add(x)
    assert np.array_equal(bins.counts, np.diff(np.concatenate(([0], r, [N]))))


def test_binned_tests_read_neither_moments_nor_digest() -> None:
    """PSI, JS, KS and W1 on bins give the same result when the sketches' digests are emptied
    and their moments changed: the direct draws may leave both out of the counts' law."""
    rng = np.random.default_rng(1)
    a = rng.normal(size=N)
    ref = _raw(a, BinCounts(derive_edges(a), source=True))
    cur = _raw(rng.normal(0.05, 1.0, N), ref.bins.empty_like())
    assert not ref.is_exact and ref.count > MAX_EXACT_VALUES
    hollow = []
    for s, shift in ((ref, 3.0), (cur, -2.0)):
        d = s.to_dict()
        d.update(td=TDigest().to_dict(), mean=s.mean + shift, m2=s.m2 * 4.0)
        hollow.append(NumericSketch.from_dict(d))
    for name, test in BINNED_TESTS:
        full, bare = test(ref, cur), test(*hollow)
        assert (full.statistic, full.p_value, full.status) == (bare.statistic, bare.p_value,
                                                                bare.status), name


def _pair_statistics(cc, direct: bool, reps: int, seed: int) -> dict[str, np.ndarray]:
    """KS, PSI, JS and W1 statistics of H0 pairs of N normal values, and the reference's first,
    middle and last edge and the current's extremes."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[float]] = {k: [] for k in ("ks", "psi", "js", "wasserstein", "e1", "e50", "e99",
                                                   "ref_min", "cur_min", "cur_max")}
    for _ in range(reps):
        if direct:
            ref = cc.reference(cc.NORMAL, N, rng)
            cur = cc.current(cc.NORMAL, N, ref, rng)
        else:
            a = rng.normal(size=N)
            ref = _raw(a, BinCounts(derive_edges(a), source=True))
            cur = _raw(rng.normal(size=N), ref.bins.empty_like())
        for name, test in BINNED_TESTS:
            out[name].append(test(ref, cur).statistic)
        e = ref.bins.edges
        out["e1"].append(e[0]), out["e50"].append(e[49]), out["e99"].append(e[-1])
        out["ref_min"].append(ref.min), out["cur_min"].append(cur.min), out["cur_max"].append(cur.max)
    return {k: np.array(v) for k, v in out.items()}


def test_direct_pairs_have_the_law_of_raw_pairs(cc) -> None:
    """Over 250 seeded pairs each, every binned statistic, the reference's edges and the
    extremes have the same law whether drawn directly or built from raw values (two-sample KS,
    p > 0.001 each; a current counted with the population's masses 1 / 100 per bin instead of
    the law's masses between the reference's drawn edges gives p ~ 0 for all four statistics)."""
    direct, raw = _pair_statistics(cc, True, 250, 2), _pair_statistics(cc, False, 250, 3)
    for key in direct:
        p = stats.ks_2samp(direct[key], raw[key]).pvalue
        assert p > 1e-3, (key, p)
    # and the direct reference's counts are the raw reference's exactly (fixed by the cut)
    rng = np.random.default_rng(4)
    a = rng.normal(size=N)
    raw_ref = _raw(a, BinCounts(derive_edges(a), source=True))
    assert np.array_equal(cc.reference(cc.NORMAL, N, rng).bins.counts, raw_ref.bins.counts)


def test_discrete_from_counts_is_the_sketch_of_its_values(cc) -> None:
    """The exact-table sketch built from counts equals the one NumericSketch.update builds from
    the same values (table, count, extremes; moments to rounding)."""
    rng = np.random.default_rng(5)
    s = cc.discrete(100_000, np.random.default_rng(6))
    counts = cc.poisson_counts(100_000, np.random.default_rng(6))
    values = rng.permutation(np.repeat(np.arange(counts.size, dtype=np.float64), counts))
    t = NumericSketch()
    for part in np.array_split(values, 7):
        t.update(part)
    assert s.exact == t.exact and (s.count, s.min, s.max) == (t.count, t.min, t.max)
    assert s.mean == pytest.approx(t.mean, rel=1e-12) and s.m2 == pytest.approx(t.m2, rel=1e-9)


def test_category_counts_have_the_law_of_raw_draws(cc) -> None:
    """Poisson counts (a mean of 38 reaches the tail beyond POISSON_MAX, drawn by rejection) and
    Zipf counts up to a cut: the same law as histograms of rng.poisson / rng.zipf (chi-square
    homogeneity of the summed counts, p > 0.001)."""
    rng = np.random.default_rng(7)
    direct = np.zeros(120, np.int64)
    for _ in range(50):
        c = cc.poisson_counts(2_000, rng, mean=38.0)
        assert c.sum() == 2_000 and c.size > cc.POISSON_MAX
        direct[:c.size] += c
    raw = np.bincount(rng.poisson(38.0, 100_000), minlength=120)
    keep = (direct + raw) > 0
    assert stats.chi2_contingency(np.vstack([direct[keep], raw[keep]])).pvalue > 1e-3
    top = 20
    counts, beyond = zip(*(cc.zipf_counts(2_000, rng, 1.3, top) for _ in range(50)), strict=True)
    direct = np.append(np.sum(counts, axis=0), sum(beyond))
    z = rng.zipf(1.3, 100_000)
    raw = np.append(np.bincount(z[z <= top], minlength=top + 1)[1:], (z > top).sum())
    assert direct.sum() == raw.sum() == 100_000
    assert stats.chi2_contingency(np.vstack([direct, raw])).pvalue > 1e-3
