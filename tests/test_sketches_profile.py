"""Window profiles: build from records or columns, merge, serialize; missing values and kinds.

Sketch-level accuracy is tested in tests/test_sketches_*.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sdk.columns import RecordColumns
from sdk.record import PredictionRecord
from sketches.categorical import category_key
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
        assert p.features["flag"].categorical.frequencies() == {category_key(False): 1500,
                                                                category_key(True): 1500}
        assert p.prediction.frequencies() == {category_key(0): 1500, category_key(1): 1500}
        assert p.latency.exact == {3.0: 3000}
    assert merged.features["x"].numeric.min == one.features["x"].numeric.min
    assert merged.features["x"].numeric.max == one.features["x"].numeric.max
    assert merged.features["x"].numeric.mean == pytest.approx(one.features["x"].numeric.mean, rel=1e-12)
    assert abs(merged.score.quantile(0.5) - one.score.quantile(0.5)) < 0.02


def test_columns_from_arrays_equal_records():
    rng = np.random.default_rng(1)
    recs = records(rng, 500)
    by_records = WindowProfile("m", 0, 300)
    by_records.add_records(recs)
    x = np.array([np.nan if r.features["x"] is None else r.features["x"] for r in recs])
    cols = RecordColumns(
        "m", [r.model_version for r in recs], [r.prediction_id for r in recs], [r.event_time for r in recs],
        {"x": x, "c": np.array([r.features["c"] for r in recs]),
         "flag": np.array([r.features["flag"] for r in recs])},
        score=np.array([r.score for r in recs]), predicted_label=[r.predicted_label for r in recs],
        latency_ms=[r.latency_ms for r in recs])
    by_columns = WindowProfile("m", 0, 300)
    by_columns.add_columns(cols)
    for name in ("x", "c", "flag"):
        a, b = by_records.features[name], by_columns.features[name]
        assert (a.null_count, a.kind, a.total) == (b.null_count, b.kind, b.total)
        assert a.categorical.exact == b.categorical.exact
        assert a.numeric.count == b.numeric.count and a.numeric.min == b.numeric.min
        assert a.numeric.max == b.numeric.max
    assert by_records.versions == by_columns.versions and by_records.count == by_columns.count


def test_feature_absent_from_some_records_counts_as_missing_in_merge():
    a = WindowProfile("m", 0, 300)
    a.add_records([PredictionRecord("m", "1", "a", 1.0, {"x": 1.0})])
    b = WindowProfile("m", 0, 300)
    b.add_records([PredictionRecord("m", "1", "b", 1.0, {"y": "u"})] * 4)
    a.merge(b)
    assert a.features["x"].null_count == 4 and a.features["y"].null_count == 1
    c = WindowProfile("m", 0, 300)
    c.add_records([PredictionRecord("m", "1", "a", 1.0, {"x": 1.0}),
                   PredictionRecord("m", "1", "b", 1.0, {})])
    assert c.features["x"].null_count == 1 and c.features["x"].total == 2


def test_none_and_nan_are_missing_inf_counted_apart_and_types_mismatched():
    p = WindowProfile("m", 0, 300)
    values = [1.0, None, float("nan"), float("inf"), -float("inf"), 3, "three", True]
    p.add_records([PredictionRecord("m", "1", str(i), 1.0, {"v": v}) for i, v in enumerate(values)])
    f = p.features["v"]
    assert (f.null_count, f.inf_count, f.numeric.count, f.categorical.count) == (2, 2, 2, 2)
    assert f.numeric.mean == 2.0 and f.kind == "numeric" and f.type_mismatch_count == 2
    assert f.categorical.frequencies() == {"three": 1, category_key(True): 1}


def test_empty_and_all_null_profiles_are_valid():
    p = WindowProfile("m", 0, 300)
    assert p.is_empty and WindowProfile.from_bytes(p.to_bytes()).count == 0
    p.add_records([PredictionRecord("m", "1", "a", 1.0, {"x": None})])
    q = WindowProfile.from_bytes(p.to_bytes())
    assert q.features["x"].kind == "empty" and math.isnan(q.features["x"].numeric.quantile(0.5))
    assert q.score.null_count == 1 and q.prediction.null_count == 1


@pytest.mark.parametrize("column", [
    ["a", "b", "a", None, "c", None],
    ["a", "b", True, 1, None],  # bool and int among strings: counted apart, as labels and numbers
    ["a", 1.0, 1, True, "1"],
    [1.0, 2, 3.5, 2],
    [1.0, None, float("nan"), float("inf")],
    [2, 3, "x", None, False],
    [None, "a", "b"],
    [None, None],
])
def test_feature_update_fast_paths_equal_value_by_value(column):
    from sketches.feature import FeatureProfile

    fast, slow = FeatureProfile(), FeatureProfile()
    fast.update(column)
    slow._update_mixed(column)  # the reference: every value routed one by one
    assert fast.to_dict() == slow.to_dict()
    assert (fast.null_count, fast.numeric_total, fast.categorical.count) == (
        slow.null_count, slow.numeric_total, slow.categorical.count)


def test_fast_bytes_read_back_as_the_same_profile():
    p = WindowProfile("m", 0, 300)
    p.add_records(records(np.random.default_rng(1), 500))
    fast, default = p.to_bytes(fast=True), p.to_bytes()
    assert WindowProfile.from_bytes(fast).to_dict() == WindowProfile.from_bytes(default).to_dict()


def test_type_hints_from_validation_give_the_same_profile():
    """Decoded columns carry their value types (RecordColumns.feature_types); a profile built
    with them equals one built by scanning the values."""
    from sdk.wire import decode_batch, encode_batch

    rng = np.random.default_rng(7)
    recs = records(rng, 400)
    for i, r in enumerate(recs):
        r.features["n"] = i if i % 3 else float(i)  # ints and floats
        r.features["mixed"] = True if i % 5 == 0 else 1.5  # bools stay categorical
    cols = decode_batch(encode_batch(recs)).columns
    assert cols.feature_types["n"] == {int, float} and bool in cols.feature_types["mixed"]
    hinted, scanned = WindowProfile("m", 0, 300), WindowProfile("m", 0, 300)
    hinted.add_columns(cols)
    cols.feature_types.clear()
    scanned.add_columns(cols)
    assert hinted.to_dict() == scanned.to_dict()
    assert hinted.features["mixed"].categorical.exact == {category_key(True): 80}


def _wire_profile(features: list[dict], labels: list) -> WindowProfile:
    """A window built as the aggregator builds it: records through the wire encoding."""
    from sdk.wire import decode_batch, encode_batch

    recs = [PredictionRecord("m", "1", str(i), 1.0, f, predicted_label=y)
            for i, (f, y) in enumerate(zip(features, labels, strict=True))]
    p = WindowProfile("m", 0, 300)
    p.add_columns(decode_batch(encode_batch(recs)).columns)
    return WindowProfile.from_bytes(p.to_bytes())


def test_category_keys_keep_the_value_type_from_the_sdk_to_the_drift_tests():
    # "true" and True, 123 and "123" merged into one category: a feature or a label whose
    # type changed upstream looked unchanged. Tolerance 1e-9 against scipy on the raw table.
    from scipy import stats

    from detectors.drift.chi2 import chi2_test
    from sketches.categorical import category_display

    n = 200
    strings = _wire_profile([{"flag": "true"}] * n, ["123"] * n)
    bools = _wire_profile([{"flag": True}] * n, [123] * n)
    mixed = _wire_profile([{"flag": "true" if i % 2 else True} for i in range(n)],
                          ["123" if i % 2 else 123 for i in range(n)])
    assert strings.features["flag"].categorical.exact == {"true": n}
    assert bools.features["flag"].categorical.exact == {category_key(True): n}
    assert mixed.features["flag"].categorical.exact == {"true": n // 2, category_key(True): n // 2}
    assert mixed.prediction.exact == {"123": n // 2, category_key(123): n // 2}
    assert sorted(map(category_display, mixed.prediction.exact)) == ["123", "123 (int)"]
    expected = stats.chi2_contingency([[n, 0], [0, n]], correction=False)
    for a, b in ((strings.features["flag"].categorical, bools.features["flag"].categorical),
                 (strings.prediction, bools.prediction)):
        r = chi2_test(a, b)
        assert r.statistic == pytest.approx(expected[0], rel=1e-9) and r.p_value < 1e-10
    # a string that starts like a typed key is escaped, never taken for one
    odd = _wire_profile([{"flag": "\x1fbool:true"}] * 3, [None] * 3)
    assert category_key(True) not in odd.features["flag"].categorical.exact


def test_profiles_written_before_typed_keys_compare_and_merge_in_their_labels():
    # tests/golden/profile_v2.fwp counted True as "true": against a window of the same data
    # with typed keys, nothing changed (no swap of "true" for True), and a merge of the two
    # reads in the old labels.
    from pathlib import Path

    from detectors.drift.chi2 import chi2_test
    from detectors.drift.unseen import new_category_test, vanished_category_test
    from tests.test_sketches_format import golden_profile

    old = WindowProfile.from_bytes((Path(__file__).parent / "golden" / "profile_v2.fwp").read_bytes())
    new = golden_profile()
    a, b = old.features["mixed"].categorical, new.features["mixed"].categorical
    assert not a.typed and b.typed and b.exact == {"a": 509, category_key(True): 471}
    for check in (chi2_test, new_category_test, vanished_category_test):
        r = check(a, b)
        assert r.effect_size == 0.0 and r.p_value >= 0.5, r  # one-sided z tests: 0.5 at no change
    merged = WindowProfile.from_bytes(new.to_bytes()).merge(old)
    m = merged.features["mixed"].categorical
    assert not m.typed and m.exact == {"a": 1018, "true": 942}
    assert WindowProfile.from_bytes(merged.to_bytes()).features["mixed"].categorical.typed is False
