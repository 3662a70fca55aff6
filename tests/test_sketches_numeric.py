"""Numeric sketches against exact numpy on the raw data: rank error, quantiles, exact mode, ties.

Tolerances: in exact mode every CDF value and quantile must equal numpy's exactly
(``method="inverted_cdf"``). In sketch mode the CDF may be off by at most the
documented ``TDIGEST_RANK_ERROR`` (0.5 %) at the 1st..99th percentiles; the data
sets are 100k values so the sampling staircase (1e-5) is negligible.
"""

from __future__ import annotations

import numpy as np
import pytest

from sketches.kernels import TAIL_ITEMS, moments
from sketches.numeric import MAX_EXACT_DISTINCT, TDIGEST_RANK_ERROR, NumericSketch
from sketches.tdigest import TDIGEST_DELTA, UNCOMPRESSED_MAX, TDigest

N = 100_000
P = np.arange(1, 100) / 100


def draw(dist: str, rng: np.random.Generator, n: int = N) -> np.ndarray:
    return {
        "normal": lambda: rng.normal(size=n),
        "lognormal": lambda: rng.lognormal(0.0, 2.0, n),  # heavy right tail
        "bimodal": lambda: np.where(rng.uniform(size=n) < 0.5, rng.normal(-5, 1, n), rng.normal(5, 0.5, n)),
        "extreme": lambda: 10.0 ** rng.uniform(-300, 300, n),
        "extreme_signed": lambda: rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-300, 300, n),
    }[dist]()


def build(x: np.ndarray, how: str, rng: np.random.Generator) -> NumericSketch:
    s = NumericSketch()
    if how == "one_pass":
        s.update(x)
    elif how == "batches_of_100":
        for chunk in np.array_split(x, x.size // 100):
            s.update(chunk)
    else:  # 32 partial sketches of random sizes, merged in random order
        parts = []
        for chunk in np.split(x, np.sort(rng.choice(np.arange(1, x.size), 31, replace=False))):
            p = NumericSketch()
            p.update(chunk)
            parts.append(p)
        for i in rng.permutation(len(parts)):
            s.merge(parts[i])
    return s


@pytest.mark.parametrize("how", ["one_pass", "batches_of_100", "merged_parts"])
@pytest.mark.parametrize("dist", ["normal", "lognormal", "bimodal", "extreme", "extreme_signed"])
def test_cdf_and_quantiles_within_rank_error_of_numpy(dist, how):
    rng = np.random.default_rng(7)
    x = draw(dist, rng)
    s = build(x, how, rng)
    assert not s.is_exact and s.rank_error == pytest.approx(TDIGEST_RANK_ERROR + 3 / x.size)
    sx = np.sort(x)
    points = np.quantile(x, P, method="inverted_cdf")
    truth = np.searchsorted(sx, points, side="right") / x.size
    assert np.max(np.abs(s.cdf_many(points) - truth)) <= TDIGEST_RANK_ERROR
    q = np.array([s.quantile(p) for p in P])
    assert np.all(np.diff(q) >= 0)  # monotone in rank
    below = np.searchsorted(sx, q, side="left") / x.size  # true rank interval of each quantile
    at_or_below = np.searchsorted(sx, q, side="right") / x.size
    assert np.all(below <= P + TDIGEST_RANK_ERROR) and np.all(at_or_below >= P - TDIGEST_RANK_ERROR)
    assert (s.count, s.min, s.max) == (x.size, sx[0], sx[-1])


def test_median_of_integers_1_to_10000():
    s = NumericSketch()
    s.update(np.arange(1, 10_001, dtype=np.float64))
    assert not s.is_exact
    assert abs(s.quantile(0.5) - 5000.5) <= 50
    qs = [s.quantile(p) for p in np.linspace(0, 1, 1001)]
    assert all(b >= a for a, b in zip(qs, qs[1:], strict=False))
    assert qs[0] == 1.0 and qs[-1] == 10_000.0


def test_integer_coded_feature_is_exact_with_inverted_cdf_quantiles_on_ties():
    rng = np.random.default_rng(1)
    x = rng.choice(np.arange(10.0), size=10_000, p=[0.4, 0.2, 0.1, 0.1, 0.05, 0.05, 0.04, 0.03, 0.02, 0.01])
    s = NumericSketch()
    for chunk in np.array_split(x, 7):
        s.update(chunk)
    assert s.is_exact and s.rank_error == 0.0
    support = s.support()
    assert support.tolist() == sorted(set(x.tolist()))
    assert s.cdf_many(support).tolist() == [np.mean(x <= v) for v in support]
    cum = np.cumsum([np.sum(x == v) for v in support]) / x.size
    beside = np.concatenate([np.linspace(0, 1, 201), np.clip(cum + 1e-9, 0, 1), np.clip(cum - 1e-9, 0, 1)])
    for p in beside:
        assert s.quantile(p) == np.quantile(x, p, method="inverted_cdf"), p
    # Exactly at p = F(v) the answer is v by definition; numpy's index n * p can round
    # past it (0.6961 * 10000 = 6961.000000000001), so numpy is not the reference there.
    assert [s.quantile(p) for p in cum] == support.tolist()


def test_ties_quantile_is_the_smallest_value_reaching_p():
    s = NumericSketch()
    s.update(np.array([1.0, 1.0, 2.0, 2.0]))
    assert [s.quantile(p) for p in (0.0, 0.25, 0.5, 0.5000001, 0.75, 1.0)] == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    assert s.cdf(1.0) == 0.5 and s.cdf(0.999) == 0.0 and s.cdf(2.0) == 1.0


def test_zero_inflated_masses_stay_exact_after_switching_to_the_sketch():
    rng = np.random.default_rng(2)
    n = 50_000
    x = np.where(rng.uniform(size=n) < 0.7, 0.0, rng.integers(1, 6, n)).astype(float)
    s = NumericSketch()
    s.update(x[: n // 2])
    assert s.is_exact and s.cdf(0.0) == np.mean(x[: n // 2] == 0.0)
    tail = np.where(rng.uniform(size=n) < 0.7, 0.0, rng.lognormal(0, 1, n))  # now continuous
    for chunk in np.array_split(np.concatenate([x[n // 2:], tail]), 50):
        s.update(chunk)
    assert not s.is_exact
    allx = np.concatenate([x, tail])
    assert s.cdf(0.0) == pytest.approx(np.mean(allx == 0.0), abs=1e-12)  # the jump at zero is exact
    assert s.cdf(np.nextafter(0.0, -1.0)) == 0.0
    assert s.quantile(0.69) == 0.0
    assert (s.count, s.min, s.max) == (allx.size, 0.0, allx.max())
    assert s.mean == pytest.approx(allx.mean(), rel=1e-12)


def test_switch_from_exact_to_sketch_is_transparent():
    x = np.repeat(np.arange(MAX_EXACT_DISTINCT, dtype=float), 50)
    s = NumericSketch()
    s.update(x)
    assert s.is_exact and len(s.exact) == MAX_EXACT_DISTINCT
    before = s.cdf_many(s.support())
    s.update(np.array([1000.5]))
    assert not s.is_exact and s.count == x.size + 1
    grid = np.arange(MAX_EXACT_DISTINCT, dtype=float)
    assert np.allclose(s.cdf_many(grid), before * x.size / (x.size + 1), atol=1e-12)
    allx = np.append(x, 1000.5)
    for p in (0.1, 0.5, 0.9, 1.0):
        assert s.quantile(p) == np.quantile(allx, p, method="inverted_cdf")


def test_repeated_batches_of_tied_values_keep_centroids_sorted():
    # Batches repeating the same values make compressions cut through runs of one value;
    # rounding once put such a run's key mean above the next centroid's, and the next
    # compression's merge of buffer and centroids raised ValueError.
    x = np.linspace(0.0, 1.0, 700)
    t = TDigest()
    for _ in range(12):
        t.update(x)
    assert t.total_weight == 12 * 700
    assert abs(float(t.cdf(np.array([0.5]))[0]) - 0.5) <= TDIGEST_RANK_ERROR + 1 / 700


def test_values_with_few_distinct_values_stay_lossless_however_many_they_are():
    # Each distinct value enters the digest as one point mass: 2,500 values taking 250 values
    # are 250 items, within TDIGEST_DELTA, so no compression runs (the grid used to see 2,500
    # items and cut some ties into two centroids).
    rng = np.random.default_rng(1)
    x = np.repeat(rng.normal(size=250), 10)
    rng.shuffle(x)
    t = TDigest()
    t.update(x)
    assert t.is_lossless and t.total_weight == x.size
    points = np.unique(x)
    assert np.array_equal(t.cdf(points), np.searchsorted(np.sort(x), points, side="right") / x.size)


def test_small_sketches_are_lossless(monkeypatch):
    monkeypatch.setattr("sketches.numeric.MAX_EXACT_VALUES", 0)  # the digest, not the values kept
    rng = np.random.default_rng(3)
    x = rng.normal(size=TDIGEST_DELTA)
    s = NumericSketch()
    for chunk in np.array_split(x, 3):
        s.update(chunk)
    assert not s.is_exact and s.rank_error == 0.0
    points = np.sort(x)
    assert np.array_equal(s.cdf_many(points), np.arange(1, x.size + 1) / x.size)
    s.update(rng.normal(size=1))
    assert s.rank_error == TDIGEST_RANK_ERROR + 3 / (TDIGEST_DELTA + 1)


def test_nan_inf_and_huge_values_never_break_the_moments():
    s = NumericSketch()
    s.update(np.array([1e308, 1e308, np.nan, np.inf, -np.inf, -1e308]))
    assert (s.count, s.null_count, s.pos_inf_count, s.neg_inf_count) == (3, 1, 1, 1)
    assert s.mean == pytest.approx(1e308 / 3, rel=1e-12) and s.max == 1e308


def test_empty_sketch_reads_as_no_data():
    s = NumericSketch()
    assert np.isnan(s.cdf(0.0)) and np.isnan(s.quantile(0.5)) and s.variance == 0.0
    with pytest.raises(ValueError):
        s.quantile(1.5)
    with pytest.raises(ValueError):
        TDigest().cdf(np.array([0.0]))


def test_serialized_sketch_reads_back_within_quantisation():
    rng = np.random.default_rng(4)
    x = rng.lognormal(0, 1, 20_000)
    s = NumericSketch()
    s.update(x)
    r = NumericSketch.from_dict(s.to_dict())
    grid = np.quantile(x, P)
    assert np.max(np.abs(r.cdf_many(grid) - s.cdf_many(grid))) < 1e-4
    assert (r.count, r.min, r.max, r.mean, r.m2) == (s.count, s.min, s.max, s.mean, s.m2)


def test_batch_that_overflows_the_exact_table_enters_the_digest_as_the_table_would(monkeypatch):
    """A batch with more than MAX_EXACT_DISTINCT distinct values goes to the digest in one
    vectorised step: the same point masses as adding the values to the table one by one."""
    monkeypatch.setattr("sketches.numeric.MAX_EXACT_VALUES", 0)  # the digest, not the values kept
    rng = np.random.default_rng(6)
    old = rng.integers(0, 20, 300).astype(float)
    batch = np.concatenate([rng.integers(0, 200, 500).astype(float), [np.nan, np.inf]])
    s = NumericSketch()
    s.update(old)
    s.update(batch)
    ref = NumericSketch()
    ref.update(old)
    finite = batch[np.isfinite(batch)]
    uniq, counts = np.unique(finite, return_counts=True)
    ref._combine_moments(finite.size, *moments(np.sort(finite)), float(finite.min()), float(finite.max()))
    ref.null_count, ref.pos_inf_count = 1, 1
    ref._add_exact(dict(zip(uniq.tolist(), counts.tolist(), strict=True)))  # value by value
    assert not s.is_exact and s.to_dict() == ref.to_dict()


@pytest.mark.parametrize("buffered", [1, 700, 3_000, 5_000])
def test_checkpoint_form_keeps_the_buffer_and_reads_back_the_same(buffered):
    """to_dict(compress=False) leaves the buffer (up to UNCOMPRESSED_MAX values: all of it)
    uncompressed, in the original too, so checkpoints never change when a digest compresses;
    read back, the digest holds the same values and continues as the original."""
    rng = np.random.default_rng(buffered)
    s = NumericSketch()
    s.update(rng.normal(size=10_000))
    s.to_dict()  # compressed: the buffer is empty
    s.update(rng.normal(size=buffered))
    d = s.to_dict(compress=False)
    kept = buffered <= UNCOMPRESSED_MAX
    assert ("buf" in d["td"]) == kept and "raw" not in d["td"]
    assert s._td._buffered == (buffered if kept else 0)  # the original is not compressed either
    r = NumericSketch.from_dict(d)
    assert r._td._buffered == s._td._buffered
    assert (r.count, r.min, r.max, r.mean, r.m2) == (s.count, s.min, s.max, s.mean, s.m2)
    assert r._td.total_weight == s._td.total_weight == s.count
    more = rng.normal(size=3_000)
    s.update(more)
    r.update(more)
    grid = np.linspace(-3.0, 3.0, 61)
    assert np.max(np.abs(r.cdf_many(grid) - s.cdf_many(grid))) < 1e-4


def test_checkpoint_form_of_a_digest_holding_merged_centroids_reads_back_buffered():
    """Merged digests' centroids in the buffer are written uncompressed as well (``"raw"``)."""
    rng = np.random.default_rng(3)
    a, b = TDigest(), TDigest()
    a.update(rng.normal(size=5_000))
    b.update(rng.normal(1.0, 1.0, size=5_000))
    a.merge(b)
    a.update(rng.normal(size=100))
    d = a.to_dict(compress=False)
    assert d.get("raw") is True and "buf" not in d and a._buffered > 0
    r = TDigest.from_dict(d)
    assert r.total_weight == a.total_weight == 10_100
    grid = np.linspace(-3.0, 4.0, 71)
    assert np.max(np.abs(r.cdf(grid) - a.cdf(grid))) < 1e-3


@pytest.mark.parametrize("dist", ["normal", "lognormal", "bimodal"])
def test_digest_cdf_bounds_are_certain_and_the_data_dependent_error_honest(dist):
    """F_n(x) always lies within the centroid-extent bounds; cdf_error is at most rank_error,
    tiny in the tails, and bounds the digest's actual error wherever the certain bound is the
    smaller one."""
    rng = np.random.default_rng(11)
    x = {"normal": rng.normal(size=200_000), "lognormal": rng.lognormal(0, 2, 200_000),
         "bimodal": np.concatenate([rng.normal(-5, 1, 100_000), rng.normal(5, 0.5, 100_000)])}[dist]
    s = NumericSketch()
    for part in np.array_split(x, 200):
        s.update(part)
    points = np.quantile(x, np.linspace(0.0005, 0.9995, 400))
    truth = np.searchsorted(np.sort(x), points, side="right") / x.size
    lower, upper = s.cdf_bounds(points)
    assert np.all(lower <= truth + 1e-12) and np.all(truth <= upper + 1e-12)
    err = s.cdf_error(points)
    assert np.all(err <= s.rank_error) and err[0] < 0.2 * s.rank_error and err[-1] < 0.2 * s.rank_error
    certain = np.maximum(s.cdf_many(points) - lower, upper - s.cdf_many(points))
    tight = certain < s.rank_error
    assert tight.sum() > 20 and np.all(np.abs(s.cdf_many(points) - truth)[tight] <= err[tight] + 1e-12)


def test_digest_keeps_its_most_extreme_values_exactly_through_merges():
    """The 16 smallest and largest distinct values stay singleton centroids (TAIL_ITEMS), in a
    digest built in batches and in a merge of several: the count beyond any of them is certain.
    The k_1 grid alone put ~110 of 10^6 values in each outermost centroid."""
    rng = np.random.default_rng(5)
    parts = [rng.normal(size=250_000) for _ in range(4)]
    merged = NumericSketch()
    for part in parts:
        s = NumericSketch()
        for chunk in np.array_split(part, 25):
            s.update(chunk)
        merged.merge(s)
    x = np.sort(np.concatenate(parts))
    for k in range(1, TAIL_ITEMS + 1):
        for point, beyond in ((x[-k - 1], k), (np.nextafter(x[k], -np.inf), k)):
            lower, upper = merged.cdf_bounds(np.array([point]))
            assert lower[0] == upper[0]  # certain
            at_or_below = np.searchsorted(x, point, side="right")
            assert round(float(merged.cdf(point)) * x.size) == at_or_below
            assert min(at_or_below, x.size - at_or_below) == beyond
    assert merged.cdf_error(np.array([x[-TAIL_ITEMS - 1], x[TAIL_ITEMS - 1]])).max() == 0.0


def test_tied_extremes_stay_one_centroid_each():
    """A run of one value at an end is one group, not TAIL_ITEMS singletons of the same value:
    5,000 zeros cost the digest no more centroids than one zero does."""
    u = np.random.default_rng(1).uniform(1, 2, 20_000)
    counts = []
    for zeros in (1, 5_000):
        td = TDigest()
        td.update(np.concatenate([np.zeros(zeros), u]))
        counts.append(td.centroid_count)
    assert counts[1] <= counts[0]
    s = NumericSketch()
    s.update(np.concatenate([np.zeros(5_000), u]))
    lower, upper = s.cdf_bounds(np.array([0.0]))
    assert lower[0] == upper[0] == 0.2
