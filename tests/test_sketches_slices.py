"""Slice sub-profiles: contents against numpy per slice, the cap (heavy hitters + other), merge."""

from __future__ import annotations

import numpy as np
import pytest

from sdk.columns import RecordColumns
from sdk.record import PredictionRecord
from sketches.categorical import category_key
from sketches.profile import WindowProfile
from sketches.slices import OTHER, SliceSet


def columns(countries: list[str | None], x: np.ndarray, score: np.ndarray) -> RecordColumns:
    n = len(countries)
    return RecordColumns("m", ["1"] * n, [str(i) for i in range(n)], [0.0] * n,
                         {"x": x, "c": ["u"] * n}, score=score.tolist(),
                         predicted_label=[int(s > 0.5) for s in score], slices={"country": countries})


def test_sub_profiles_hold_score_label_and_configured_features_per_slice():
    rng = np.random.default_rng(0)
    countries = rng.choice(np.array(["DE", "FR", "US", None], dtype=object), 5_000).tolist()
    x, score = rng.normal(size=5_000), rng.uniform(size=5_000)
    p = WindowProfile("m", 0, 300, slice_features=["x"])
    p.add_columns(columns(countries, x, score))
    subs = p.slices["country"].profiles
    assert set(subs) == {"DE", "FR", "US"} and p.slices["country"].capped_records == 0
    for k, sub in subs.items():
        rows = np.array([c == k for c in countries])
        assert sub.count == rows.sum() and set(sub.features) == {"x"}
        expected = (rows.sum(), score[rows].min(), score[rows].max())
        assert (sub.score.count, sub.score.min, sub.score.max) == expected
        assert sub.score.mean == pytest.approx(score[rows].mean(), rel=1e-12)
        assert sub.features["x"].numeric.mean == pytest.approx(x[rows].mean(), rel=1e-9)
        assert sub.prediction.exact == {category_key(1): (score[rows] > 0.5).sum(),
                                            category_key(0): (score[rows] <= 0.5).sum()}
    assert sum(s.count for s in subs.values()) == sum(c is not None for c in countries)


def test_cap_keeps_heavy_hitters_and_counts_the_rest_as_other():
    countries = ["a"] * 50 + ["b"] * 40 + ["c"] * 30 + ["d"] * 20 + ["e"] * 10
    p = WindowProfile("m", 0, 300, max_slice_values=3)
    p.add_columns(columns(countries, np.zeros(150), np.full(150, 0.3)))
    s = p.slices["country"]
    assert {k: v.count for k, v in s.profiles.items()} == {"a": 50, "b": 40, "c": 30, OTHER: 30}
    assert s.capped_records == 30
    p.add_columns(columns(["z"] * 5 + ["a"] * 5, np.zeros(10), np.full(10, 0.3)))  # cap full: z -> other
    assert s.profiles["a"].count == 55 and s.capped_records == 35 and "z" not in s.profiles


def test_merge_keeps_the_heaviest_values_of_the_merged_traffic():
    a = WindowProfile("m", 0, 300, max_slice_values=2)
    a.add_columns(columns(["x"] * 10 + ["y"] * 5, np.zeros(15), np.full(15, 0.1)))
    b = WindowProfile("m", 0, 300, max_slice_values=2)
    b.add_columns(columns(["z"] * 20 + ["w"], np.zeros(21), np.full(21, 0.9)))
    merged = WindowProfile.from_bytes(a.to_bytes()).merge(b)
    s = merged.slices["country"]
    assert {k: v.count for k, v in s.profiles.items()} == {"z": 20, "x": 10, OTHER: 6}
    assert s.capped_records == 6 and s.profiles[OTHER].score.count == 6
    assert a.slices["country"].profiles.keys() == {"x", "y"}  # the argument is left alone
    assert b.slices["country"].profiles["z"].count == 20


def test_records_path_and_round_trip_keep_slices():
    p = WindowProfile("m", 0, 300, slice_features=["x"], max_slice_values=4)
    p.add_records([PredictionRecord("m", "1", str(i), 0.0, {"x": float(i)}, score=0.5,
                                    slices={"country": "DE"} if i % 2 else {}) for i in range(10)])
    q = WindowProfile.from_bytes(p.to_bytes())
    assert (q.slice_features, q.max_slice_values) == (("x",), 4)
    de = q.slices["country"].profiles["DE"]
    assert de.count == 5 and de.features["x"].numeric.exact == {1.0: 1, 3.0: 1, 5.0: 1, 7.0: 1, 9.0: 1}


def test_slice_set_rejects_a_zero_cap():
    with pytest.raises(ValueError):
        SliceSet(0, dict)
