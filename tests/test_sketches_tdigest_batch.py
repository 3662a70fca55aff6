"""Compressing the digests of a window in one pass gives each digest the centroids its own
compression gives (sketches.tdigest.compress_many, WindowProfile.to_bytes)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from sdk.columns import RecordColumns
from sketches.profile import WindowProfile
from sketches.tdigest import TDIGEST_DELTA, TDigest, _Items, compress_many


def _points(values: np.ndarray, weights: np.ndarray | None = None) -> _Items:
    values = np.sort(values)
    return _Items.points(values, np.ones(values.size) if weights is None else weights)


def _parts(rng: np.random.Generator) -> list[_Items]:
    """Digests' items of every shape the cut passes treat apart: smooth, heavy runs of one value
    (only in some parts), clusters far apart, zero-inflated, sums past 1.8e308 (only in one part),
    weighted, merged centroids, and parts too small to compress."""
    n = 2_500
    merged = compress_many([_points(rng.normal(size=5_000))])[0].interleave(_points(rng.normal(2, 1, n)))
    return [
        _points(rng.normal(size=n)),
        _points(np.round(rng.normal(size=n), 1)),
        _points(rng.lognormal(0, 3, n)),
        _points(np.concatenate((rng.normal(size=n // 2), rng.normal(1e6, 1, n // 2)))),
        # a run of 0 ending one part and one starting the next: each too light to be heavy alone
        _points(np.append(-rng.exponential(size=8_960), np.zeros(40))),
        _points(np.append(np.zeros(40), rng.exponential(size=8_960))),
        _points(np.where(rng.uniform(size=n) < 0.7, 0.0, rng.exponential(size=n))),
        _points(rng.choice([-1.7e308, 1.7e308, 1e308, 0.0], n) * rng.uniform(0.5, 1.0, n)),
        _points(rng.normal(size=TDIGEST_DELTA)),  # not compressed (index 8)
        _points(np.arange(600.0), np.where(np.arange(600) == 300, 8.0, 1.0)),  # a heavy point, no run
        merged,
        _points(-rng.pareto(1.5, n)),
    ]


@pytest.mark.parametrize("seed", range(4))
def test_a_digest_compressed_with_others_gets_the_centroids_of_its_own_compression(seed):
    rng = np.random.default_rng(seed)
    parts = _parts(rng)
    order = np.arange(len(parts)) if seed == 0 else rng.permutation(len(parts))  # other neighbours
    together = compress_many([parts[i] for i in order])
    for got, i in zip(together, order, strict=True):
        alone = compress_many([parts[i]])[0]
        for field in _Items.__slots__:
            assert np.array_equal(getattr(got, field), getattr(alone, field)), (i, field)
    assert together[list(order).index(8)] is parts[8]  # at most TDIGEST_DELTA items: left as they are
    assert all(c.size <= TDIGEST_DELTA for c in together)


def test_a_stored_window_holds_the_digests_each_sketch_would_compress_alone():
    rng = np.random.default_rng(7)
    n = 3_000
    p = WindowProfile("m", 0, 300, slice_features=("x",))
    p.add_columns(RecordColumns(
        "m", ["1"] * n, [str(i) for i in range(n)], [0.0] * n,
        {"x": rng.normal(size=n), "y": rng.lognormal(size=n), "z": np.round(rng.normal(size=n), 1)},
        score=rng.uniform(size=n).tolist(), latency_ms=rng.exponential(size=n).tolist(),
        slices={"region": rng.choice(["a", "b"], n).tolist()}))
    one_by_one = copy.deepcopy(p)
    digests = list(one_by_one._digests())
    assert len(digests) >= 5 and all(isinstance(d, TDigest) and d._buffered for d in digests)
    for d in digests:
        d._flush()
    assert p.to_bytes() == one_by_one.to_bytes()
    assert not any(d._buffered for d in p._digests())
