"""The sketches' compiled loops (sketches.kernels): where they cache their machine code, one
compiled signature whatever arrays they are given, what the digests keep, and the numeric batch's
moments and bin counts against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from numba.core import caching

from sketches.kernels import (
    _compiled,
    _key_scaled_all,
    compress_parts,
    count_sorted,
    key_scaled_each,
    moments,
)
from sketches.tdigest import TDIGEST_DELTA, TDigest, float_keys


def _twice(x: float) -> float:
    return 2.0 * x


def test_compiled_functions_are_cached_where_a_directory_is_writable():
    assert isinstance(_compiled(_twice)._cache, caching.FunctionCache)


def test_without_a_writable_cache_directory_they_compile_in_the_process(monkeypatch):
    # a read-only file system and no NUMBA_CACHE_DIR: numba's cache=True alone raises
    # "no locator available" at the first call
    def read_only(self):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(caching._CacheLocator, "ensure_cache_path", read_only)
    monkeypatch.setattr(caching.config, "CACHE_DIR", "")
    twice = _compiled(_twice)
    assert isinstance(twice._cache, caching.NullCache)
    assert twice(1.5) == 3.0


def test_key_scaled_each_takes_any_float_arrays_through_one_compiled_signature():
    rng = np.random.default_rng(3)
    lo = np.sort(10.0 ** rng.uniform(-100, 0, 40))
    hi = lo * 10.0 ** rng.uniform(0, 10, 40)
    mean = lo + (hi - lo) * rng.uniform(0, 1, 40)
    kmean = float_keys(lo) + (float_keys(hi) - float_keys(lo)) * rng.uniform(0, 1, 40)
    args = [mean, kmean, lo, hi, float_keys(lo), float_keys(hi)]
    expected = key_scaled_each(*args)
    assert 0 < expected.sum() < expected.size  # both answers occur
    strided = [np.repeat(a, 2)[::2] for a in args]  # not contiguous
    read_only = [np.frombuffer(a.tobytes()) for a in args]
    as_lists = [a.tolist() for a in args]
    for form in (strided, read_only, as_lists):
        assert np.array_equal(key_scaled_each(*form), expected)
    assert len(_key_scaled_all.signatures) == 1


@pytest.mark.parametrize("seed", range(5))
def test_count_sorted_counts_as_a_search_of_each_edge_and_moments_as_numpy(seed):
    rng = np.random.default_rng(seed)
    edges = np.unique(np.round(rng.normal(size=int(rng.integers(1, 120))), 1))
    values = np.sort(np.concatenate([np.round(rng.normal(size=int(rng.integers(1, 3_000))), 1),
                                     rng.choice(edges, 50)]))  # values on the edges
    counts = np.zeros(edges.size + 1, np.int64)
    count_sorted(values, edges, counts)
    at_or_below = np.searchsorted(values, edges, side="right")
    assert counts.tolist() == np.diff(np.concatenate(([0], at_or_below, [values.size]))).tolist()
    mean, m2 = moments(values)
    assert mean == pytest.approx(values.mean(), rel=1e-12, abs=1e-15)
    assert m2 == pytest.approx(((values - values.mean()) ** 2).sum(), rel=1e-10)


def test_a_compressed_digest_keeps_its_centroids_not_the_compressions_scratch():
    d = TDigest()
    d.update(np.random.default_rng(0).normal(size=16_384))
    c = d._centroids
    held = c.w.base  # the five fields are rows of one array that owns its memory
    assert 0 < c.size <= TDIGEST_DELTA and held.base is None and held.nbytes == 5 * 8 * c.size


def test_digests_of_any_number_type_compress_through_one_compiled_signature():
    for values in (np.arange(1_000), np.arange(1_000, dtype=np.float32), np.arange(1_000.0)):
        d = TDigest()
        d.update_weighted(values, np.ones(values.size, np.int64))
        assert d.total_weight == 1_000 and d.centroid_count < 1_000
    assert len(compress_parts.signatures) == 1
