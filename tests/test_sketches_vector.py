"""Vector profiles (sketches.vector): exact merges, a uniform mergeable sample, the recorded
projection, the window profile's accounting of missing vectors, and the size budget."""

from __future__ import annotations

import array
import zlib

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sdk.columns import RecordColumns
from sketches.profile import WindowProfile
from sketches.vector import (
    BINS,
    RESERVOIR_SIZE,
    VectorProfile,
    bin_edges,
    bin_index,
    clean_vectors,
    fingerprint,
    projection,
)


def _profile(x: np.ndarray, start: int = 0, dim: int | None = None) -> VectorProfile:
    p = VectorProfile(dim or x.shape[1])
    for s in range(0, len(x), 100):
        part = x[s:s + 100]
        p.update(part, [f"r{start + s + i}" for i in range(len(part))])
    return p


def _same(a: VectorProfile, b: VectorProfile) -> None:
    assert (a.count, a.nulls) == (b.count, b.nulls)
    np.testing.assert_allclose(a.sum, b.sum, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(a.zz, b.zz, rtol=1e-12, atol=1e-9)
    assert (a.bins == b.bins).all()
    assert (a.sample_keys == b.sample_keys).all() and (a.sample == b.sample).all()
    assert a.norms.count == b.norms.count


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 400), min_size=3, max_size=3), st.sampled_from([5, 40, 384]))
def test_merge_is_associative_and_commutative(sizes, dim):
    rng = np.random.default_rng(sum(sizes) + dim)
    parts = [_profile(rng.standard_normal((n, dim)), 10_000 * i, dim) for i, n in enumerate(sizes)]
    a, b, c = parts
    left = a.copy().merge(b).merge(c)
    right = a.copy().merge(b.copy().merge(c))
    swapped = c.copy().merge(a).merge(b)
    _same(left, right)
    _same(left, swapped)
    x = np.concatenate([rng.standard_normal((0, dim))])  # (an empty part merges as nothing)
    _same(left, left.copy().merge(_profile(x, 0, dim)))


def test_moments_match_the_raw_data():
    """Tolerance 1e-9: float64 sums of 3,000 float32-exact values."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3_000, 384)).astype(np.float32) * 2 + 1
    p = _profile(x.astype(np.float64))
    z = x.astype(np.float64) @ projection(384)
    np.testing.assert_allclose(p.mean, x.mean(0, dtype=np.float64), atol=1e-9)
    np.testing.assert_allclose(p.projected_covariance(), np.cov(z.T), rtol=1e-9, atol=1e-9)
    norms = np.linalg.norm(x.astype(np.float64), axis=1)
    assert p.norms.mean == pytest.approx(norms.mean(), rel=1e-12)
    # the bins count each direction coordinate exactly
    u = z / norms[:, None]
    for j in (0, 17, 31):
        counts = np.histogram(u[:, j], bins=bin_edges())[0]
        assert (p.bins[j] == counts).all()
    assert (p.bins.sum(axis=1) == 3_000).all()


def test_float32_and_float64_input_agree():
    """float32 input is projected in float32: each z has a relative error ~1e-7 * sqrt(d),
    so the second moments agree to 1e-5 of their largest entry."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((500, 64)).astype(np.float32)
    a, b = _profile(x), _profile(x.astype(np.float64))
    np.testing.assert_allclose(a.zz, b.zz, atol=1e-5 * np.abs(b.zz).max())
    assert (a.sample_keys == b.sample_keys).all()


def test_the_sample_is_uniform_over_the_records_of_merged_profiles():
    """Each of 1,000 records, spread over 4 profiles of unequal sizes, is in the merged sample
    with probability 256/1000: inclusion counts over 300 runs, tested by blocks of 50 records
    (chi-square, p > 0.001 expected by chance 999 times in 1000)."""
    runs, n = 300, 1_000
    included = np.zeros(n)
    sizes = [100, 150, 250, 500]
    for run in range(runs):
        merged = VectorProfile(4)
        start = 0
        for size in sizes:
            part = VectorProfile(4)
            x = np.arange(start, start + size, dtype=np.float64)[:, None] * np.ones(4)
            for s in range(0, size, 50):
                part.update(x[s:s + 50], [f"{run}-{start + s + i}" for i in range(min(50, size - s))])
            merged.merge(part)
            start += size
        assert merged.sample.shape == (RESERVOIR_SIZE, 4)
        included[np.rint(merged.sample[:, 0]).astype(int)] += 1
    assert included.sum() == runs * RESERVOIR_SIZE
    blocks = included.reshape(-1, 50).sum(axis=1)
    assert stats.chisquare(blocks).pvalue > 1e-3
    assert abs(included.mean() / runs - RESERVOIR_SIZE / n) < 1e-12


def test_projection_is_recorded_and_checked():
    assert fingerprint(projection(384)) == -237.529262  # the seed's matrix, pinned
    assert projection(8).shape == (8, 8) and (projection(8) == np.eye(8)).all()
    d = _profile(np.ones((3, 384))).to_dict()
    assert (d["dim"], d["k"]) == (384, 32)
    with pytest.raises(ValueError, match="projection"):
        VectorProfile.from_dict({**d, "fingerprint": 1.0})
    with pytest.raises(ValueError, match="different shape"):
        VectorProfile(384).merge(VectorProfile(385))


def test_round_trip_is_exact():
    p = _profile(np.random.default_rng(1).standard_normal((700, 100)))
    p.add_nulls(3)
    _same(VectorProfile.from_dict(msgpack.unpackb(msgpack.packb(p.to_dict()))), p)


def test_size_of_a_384d_feature_window_is_within_64_kib():
    """100,000 records: the serialized vector profile, before and after zlib."""
    rng = np.random.default_rng(2)
    p = VectorProfile(384)
    for s in range(0, 100_000, 1_000):
        p.update(rng.standard_normal((1_000, 384)).astype(np.float32), [f"p{s + i}" for i in range(1_000)])
    body = msgpack.packb(p.to_dict())
    assert len(body) <= 64 * 1024
    assert len(zlib.compress(body, 6)) <= 48 * 1024


def test_bins_cover_minus_one_to_one():
    assert bin_index(np.array([-1.0, 1.0])).tolist() == [0, BINS - 1]
    edges = bin_edges()
    assert edges[0] == pytest.approx(-1) and edges[-1] == pytest.approx(1) and edges[BINS // 2] == 0
    inner = (edges[:-1] + edges[1:]) / 2
    assert (bin_index(inner) == np.arange(BINS)).all()


def _f32(*v: float) -> bytes:
    return array.array("f", v).tobytes()


def test_clean_vectors_refuses_wrong_length_and_non_finite():
    c = clean_vectors([_f32(1, 2, 3), _f32(1, 2), None, _f32(1, float("nan"), 0), _f32(4, 5, 6)], "e", None)
    assert c.rows.tolist() == [0, 4]
    assert [(i, e.reason) for i, e in c.dropped] == [(1, "vector_dimension"), (3, "not_finite")]
    declared = clean_vectors([_f32(1, 2, 3)], "e", 2)
    assert declared.rows.size == 0 and declared.dropped[0][1].reason == "vector_dimension"


def test_window_profile_counts_missing_vectors_and_merges():
    def cols(n, start, with_vectors=True):
        c = RecordColumns("m", ["1"] * n, [f"p{start + i}" for i in range(n)], [0.0] * n, {"x": [1.0] * n})
        if with_vectors:
            c.vectors = {"emb": [_f32(i, 1.0, 2.0) if i % 3 else None for i in range(n)]}
        return c

    a = WindowProfile("m", 0, 300)
    a.add_columns(cols(5, 0, with_vectors=False))
    a.add_columns(cols(9, 5))
    emb = a.vectors["emb"]
    assert (emb.count, emb.nulls) == (6, 8)  # 5 records before it, 3 without one
    b = WindowProfile("m", 0, 300)
    b.add_columns(cols(4, 100, with_vectors=False))
    merged = WindowProfile.from_bytes(a.to_bytes()).merge(b)
    assert (merged.count, merged.vectors["emb"].count, merged.vectors["emb"].nulls) == (18, 6, 12)
    other = WindowProfile("m", 0, 300)
    other.merge(a)
    assert (other.vectors["emb"].count, other.vectors["emb"].nulls) == (6, 8)
    again = WindowProfile.from_bytes(merged.to_bytes(fast=True))
    _same(again.vectors["emb"], merged.vectors["emb"])
