"""Profiles: build, merge, serialize; numeric and categorical sketches against exact numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sdk.record import PredictionRecord
from sketches.categorical import MAX_EXACT_CATEGORIES, CategoricalSketch
from sketches.numeric import MAX_EXACT_DISTINCT, TDIGEST_RANK_ERROR, NumericSketch
from sketches.profile import WindowProfile


def records(rng: np.random.Generator, n: int, start: int = 0) -> list[PredictionRecord]:
    out = []
    for i in range(n):
        x = float(rng.normal()) if i % 10 else None
        out.append(PredictionRecord(
            "m", "1" if i % 3 else "2", f"p{start + i}", 1.0 + i,
            {"x": x, "c": str(rng.choice(["a", "b", "c"])), "flag": bool(i % 2)},
            score=float(rng.uniform()), predicted_label=int(i % 2), latency_ms=3.0,
        ))
    return out


def test_profile_round_trip_and_merge_equal_one_pass():
    rng = np.random.default_rng(0)
    recs = records(rng, 3000)
    one = WindowProfile("m", 0, 300)
    one.add_records(recs)
    parts = [WindowProfile("m", 0, 300) for _ in range(3)]
    for i, p in enumerate(parts):
        p.add_records(recs[i::3])
    merged = WindowProfile.from_bytes(parts[2].to_bytes())
    merged.merge(WindowProfile.from_bytes(parts[0].to_bytes())).merge(parts[1])
    for p in (one, merged):
        assert p.count == 3000 and p.versions == {"1": 2000, "2": 1000}
        x = p.features["x"]
        assert x.null_count == 300 and x.numeric.count == 2700 and x.kind == "numeric"
        assert p.features["c"].categorical.frequencies() == one.features["c"].categorical.frequencies()
        assert p.features["flag"].categorical.frequencies() == {"false": 1500, "true": 1500}
        assert p.prediction.frequencies() == {"0": 1500, "1": 1500}
    assert merged.features["x"].numeric.min == one.features["x"].numeric.min
    assert merged.features["x"].numeric.max == one.features["x"].numeric.max
    assert merged.features["x"].numeric.mean == pytest.approx(one.features["x"].numeric.mean, rel=1e-12)
    assert abs(merged.score.quantile(0.5) - one.score.quantile(0.5)) < 0.02


def test_feature_absent_from_some_records_counts_as_missing_in_merge():
    a = WindowProfile("m", 0, 300)
    a.add_records([PredictionRecord("m", "1", "a", 1.0, {"x": 1.0})])
    b = WindowProfile("m", 0, 300)
    b.add_records([PredictionRecord("m", "1", "b", 1.0, {"y": "u"})] * 4)
    a.merge(b)
    assert a.features["x"].null_count == 4 and a.features["y"].null_count == 1


def test_nan_is_missing_and_inf_is_counted_apart_from_sums():
    s = NumericSketch()
    s.update(np.array([1.0, np.nan, np.inf, -np.inf, 3.0]))
    assert (s.count, s.null_count, s.pos_inf_count, s.neg_inf_count) == (2, 1, 1, 1)
    assert s.mean == 2.0 and s.max == 3.0


def test_empty_and_all_null_profiles_are_valid():
    p = WindowProfile("m", 0, 300)
    assert p.is_empty and WindowProfile.from_bytes(p.to_bytes()).count == 0
    p.add_records([PredictionRecord("m", "1", "a", 1.0, {"x": None})])
    assert p.features["x"].kind == "empty" and math.isnan(p.features["x"].numeric.quantile(0.5))


def test_median_of_integers_1_to_10000_and_quantiles_monotone():
    s = NumericSketch()
    s.update(np.arange(1, 10_001, dtype=np.float64))
    assert not s.is_exact
    assert abs(s.quantile(0.5) - 5000.5) <= 50
    qs = [s.quantile(p) for p in np.linspace(0, 1, 101)]
    assert all(b >= a for a, b in zip(qs, qs[1:], strict=False))


@pytest.mark.parametrize("dist", ["normal", "lognormal", "uniform"])
def test_tdigest_rank_error_within_documented_bound(dist):
    rng = np.random.default_rng(3)
    x = {"normal": rng.normal(size=200_000), "lognormal": rng.lognormal(0, 2, 200_000),
         "uniform": rng.uniform(size=200_000)}[dist]
    s = NumericSketch()
    for chunk in np.array_split(x, 20):
        s.update(chunk)
    points = np.quantile(x, np.arange(1, 100) / 100)
    truth = np.searchsorted(np.sort(x), points, side="right") / x.size
    assert np.max(np.abs(s.cdf_many(points) - truth)) <= TDIGEST_RANK_ERROR


def test_exact_mode_for_few_distinct_values_then_sketch():
    rng = np.random.default_rng(4)
    x = np.where(rng.uniform(size=10_000) < 0.7, 0.0, rng.integers(1, 6, 10_000)).astype(float)
    s = NumericSketch()
    s.update(x)
    assert s.is_exact
    assert s.cdf(0.0) == np.mean(x <= 0.0) and s.cdf(2.0) == np.mean(x <= 2.0)
    for p in (0.1, 0.7, 0.71, 0.9, 1.0):
        assert s.quantile(p) == np.quantile(x, p, method="inverted_cdf")
    s.update(np.arange(MAX_EXACT_DISTINCT + 1, dtype=float) + 0.5)
    assert not s.is_exact and s.count == 10_000 + MAX_EXACT_DISTINCT + 1


def test_categorical_exact_then_sketched_never_reports_unseen():
    s = CategoricalSketch()
    s.update(["a"] * 5 + ["b"] * 3)
    assert s.frequencies() == {"a": 5, "b": 3} and s.estimate("never") == 0
    other = CategoricalSketch()
    other.update([f"v{i}" for i in range(MAX_EXACT_CATEGORIES + 10)] + ["a"] * 100)
    s.merge(other)
    assert not s.is_exact and s.count == 8 + MAX_EXACT_CATEGORIES + 110
    assert s.frequencies(1) == {"a": 105}
    assert "never" not in s.frequencies()
    assert abs(s.distinct - (MAX_EXACT_CATEGORIES + 11)) / (MAX_EXACT_CATEGORIES + 11) < 0.05
    s2 = CategoricalSketch.from_dict(s.to_dict())
    assert s2.frequencies(1) == {"a": 105} and s2.estimate("v3") >= 1
