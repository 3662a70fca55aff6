"""Co-moments of a model's numeric features: exact against numpy, merge of splits equals the
whole, complete-case rows, feature choice and serialisation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sdk.columns import RecordColumns
from sketches.comoments import MAX_FEATURES, CoMoments
from sketches.profile import WindowProfile

# Chan's update is exact in real arithmetic; in float64 the merged moments agree with a
# single pass to ~1e-12 relative for data of unit scale and a few thousand rows.
RTOL = 1e-9


def _block(x: np.ndarray, names=("a", "b", "c")) -> CoMoments:
    c = CoMoments()
    c.update({k: x[:, j] for j, k in enumerate(names)}, {}, len(x))
    return c


def test_block_equals_numpy_on_complete_rows():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(500, 3)) @ np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.0, 0.0, 2.0]])
    x[::7, 1] = np.nan
    x[3, 2] = np.inf
    c = _block(x)
    keep = np.isfinite(x).all(axis=1)
    assert (c.n, c.excluded) == (int(keep.sum()), int((~keep).sum()))
    np.testing.assert_allclose(c.mean, x[keep].mean(axis=0), rtol=RTOL)
    np.testing.assert_allclose(c.covariance(), np.cov(x[keep].T), rtol=RTOL)
    np.testing.assert_allclose(c.correlation(), np.corrcoef(x[keep].T), rtol=RTOL)
    np.testing.assert_allclose(c.kurtosis(), stats.kurtosis(x[keep], fisher=False), rtol=RTOL)
    np.testing.assert_allclose(c.m3 / c.n, stats.moment(x[keep], 3), rtol=RTOL)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.lists(st.integers(0, 60), min_size=1, max_size=6),
       st.floats(-1e4, 1e4), st.floats(1e-3, 1e3))
def test_merge_of_splits_equals_the_whole(seed, sizes, loc, scale):
    rng = np.random.default_rng(seed)
    x = loc + scale * rng.normal(size=(sum(sizes), 3))
    x[rng.uniform(size=x.shape) < 0.05] = np.nan
    whole = _block(x)
    merged, start = CoMoments(), 0
    for k in sizes:
        merged.merge(_block(x[start:start + k]) if k else CoMoments())
        start += k
    assert merged.names in (whole.names, ())
    assert (merged.n, merged.excluded) == (whole.n, whole.excluded)
    if whole.n:
        np.testing.assert_allclose(merged.mean, whole.mean, rtol=RTOL, atol=RTOL * scale)
        np.testing.assert_allclose(merged.m2, whole.m2, rtol=RTOL, atol=RTOL * scale**2 * whole.n)
        # the higher sums carry the means' rounding (|loc| / scale up to 1e7 here) to powers 3, 4
        np.testing.assert_allclose(merged.m3, whole.m3, rtol=1e-6, atol=1e-6 * scale**3 * whole.n)
        np.testing.assert_allclose(merged.m4, whole.m4, rtol=1e-6, atol=1e-6 * scale**4 * whole.n)


def test_profiles_merge_their_blocks_and_read_back():
    rng = np.random.default_rng(2)
    n = 3_000
    feats = {"x": rng.normal(size=n), "y": rng.normal(size=n).tolist(), "c": ["u"] * n}
    cols = RecordColumns("m", ["1"] * n, [str(i) for i in range(n)], [0.0] * n, feats)
    whole = WindowProfile("m", 0, 300)
    whole.add_columns(cols)
    parts = [WindowProfile("m", 0, 300) for _ in range(3)]
    for i, p in enumerate(parts):
        p.add_columns(cols.take(range(i, n, 3)))
    merged = WindowProfile.from_bytes(parts[0].to_bytes())
    for p in parts[1:]:
        merged.merge(WindowProfile.from_bytes(p.to_bytes()))
    assert merged.comoments.names == whole.comoments.names == ("x", "y")
    np.testing.assert_allclose(merged.comoments.m2, whole.comoments.m2, rtol=RTOL)
    np.testing.assert_allclose(merged.comoments.mean, whole.comoments.mean, rtol=RTOL, atol=1e-12)


def test_blocks_over_different_features_merge_on_the_shared_ones():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 3))
    a, b = _block(x[:200]), _block(x[200:, :2], names=("a", "b"))
    a.merge(b)
    assert a.names == ("a", "b") and a.n == 400
    np.testing.assert_allclose(a.covariance(), np.cov(x[:, :2].T), rtol=RTOL)


def test_features_are_the_first_numeric_ones_by_name_and_capped():
    c = CoMoments()
    cols = {f"f{i:03d}": np.arange(4.0) * i for i in range(MAX_FEATURES + 5)}
    cols |= {"label": ["a", "b", "c", "d"], "flag": np.array([True] * 4), "aaa": [1, None, 2, 3]}
    c.update(cols, {}, 4)
    assert c.dim == MAX_FEATURES and c.names[:2] == ("aaa", "f000")
    assert (c.n, c.excluded) == (3, 1)
    c.update({"f000": [1.0]}, {}, 1)  # the block's other features absent: excluded
    assert (c.n, c.excluded) == (3, 2)


def test_a_non_number_in_a_numeric_feature_excludes_its_row_only():
    c = CoMoments(("x", "y"))
    c.update({"x": [1.0, "oops", 3.0, True], "y": [1.0, 2.0, 5.0, 1.0]}, {}, 4)
    assert (c.n, c.excluded) == (2, 2) and c.mean.tolist() == [2.0, 3.0]


def test_correlation_of_a_constant_feature_is_zero_and_small_blocks_refuse():
    c = _block(np.column_stack([np.ones(10), np.arange(10.0), np.arange(10.0) ** 2]))
    assert c.correlation()[0, 1] == 0.0 and c.correlation()[0, 0] == 1.0
    with pytest.raises(ValueError, match=">= 2 complete rows"):
        _block(np.ones((1, 3))).covariance()


def test_corrupt_arrays_are_refused():
    d = _block(np.ones((3, 3))).to_dict()
    d["names"] = ["a", "b"]
    with pytest.raises(ValueError, match="corrupt"):
        CoMoments.from_dict(d)
