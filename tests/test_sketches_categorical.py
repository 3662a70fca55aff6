"""Categorical sketches against exact counts: top-K, count intervals, unseen categories, distinct counts.

Every bound asserted here is the sketch's documented one and is deterministic
(frequent items and count-min never undercount, the frequent-items counter never
overcounts), except the distinct count, whose CPC relative standard error is
about 0.5 % at lg_k = 14: the 2 % tolerance is 4 standard errors.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from sketches.categorical import FI_LG_MAX_MAP_SIZE, MAX_EXACT_CATEGORIES, CategoricalSketch

N = 100_000
NAMES = np.array([f"value_{i:04d}" for i in range(2_000)])  # more than MAX_EXACT_CATEGORIES


def stream(kind: str, rng: np.random.Generator, n: int = N) -> list[str]:
    idx = rng.zipf(1.2, n) % NAMES.size if kind == "zipf" else rng.integers(0, NAMES.size, n)
    return NAMES[idx].tolist()


def sketch_of(values: list[str], batch: int = 1_000) -> CategoricalSketch:
    s = CategoricalSketch()
    for i in range(0, len(values), batch):
        s.update(values[i:i + batch])
    return s


def test_exact_while_few_categories():
    s = sketch_of(["a"] * 5 + ["b"] * 3 + ["c"])
    assert s.is_exact and s.frequencies() == {"a": 5, "b": 3, "c": 1} and s.frequencies(1) == {"a": 5}
    assert s.count_interval("b") == (3, 3) and s.estimate("never") == 0 and s.distinct == 3.0
    assert s.frequency_error == 0 and s.cms_error == 0.0


def test_top_k_exact_where_the_frequent_items_sketch_guarantees_it():
    """Sketched with fewer categories than the frequent-items map holds (as a profile written
    while the exact table held 256 categories reads back): every count is still exact."""
    rng = np.random.default_rng(0)
    values = NAMES[rng.zipf(1.1, 50_000) % 500].tolist()
    truth = Counter(values)
    assert 256 < len(truth) <= 0.75 * 2**FI_LG_MAX_MAP_SIZE < MAX_EXACT_CATEGORIES
    s = sketch_of(values[:10_000])
    s._leave_exact()
    for i in range(10_000, len(values), 1_000):
        s.update(values[i:i + 1_000])
    assert not s.is_exact and s.frequency_error == 0
    assert s.frequencies() == dict(sorted(truth.items(), key=lambda kv: (-kv[1], kv[0])))
    assert s.distinct == pytest.approx(len(truth), rel=0.02)


@pytest.mark.parametrize("kind", ["zipf", "uniform"])
def test_count_intervals_contain_the_truth_and_unseen_is_never_present(kind):
    rng = np.random.default_rng(1)
    values = stream(kind, rng)
    truth = Counter(values)
    s = sketch_of(values)
    assert not s.is_exact and s.count == N
    eps_n = s.cms_error
    assert eps_n == pytest.approx(np.e / 512 * N)
    assert 0 < s.frequency_error <= 3.5 / 2**FI_LG_MAX_MAP_SIZE * N  # a-priori frequent-items bound
    for v in NAMES.tolist():
        lower, upper = s.count_interval(v)
        assert lower <= truth[v] <= upper
        assert upper - truth[v] <= eps_n  # count-min: never more than eps * N over
        assert upper - lower <= s.frequency_error
        # the point estimate's documented interval: [c - N / w, c + eps N]
        assert truth[v] - N / 512 <= s.estimate(v) <= truth[v] + eps_n
    top = s.frequencies()
    assert top and set(top) <= set(truth)
    for v, c in top.items():
        assert c == s.estimate(v) > 0
    if kind == "zipf":  # heavy hitters come out in order
        assert list(s.frequencies(5)) == [v for v, _ in truth.most_common(5)]
    never = [f"never_{i}" for i in range(10_000)]
    for v in never:
        assert s.count_interval(v)[0] == 0 and v not in top
    # count-min: over eps N with probability <= exp(-d) for any one category
    assert np.mean([s.estimate(v) > eps_n for v in never]) <= np.exp(-3)


@pytest.mark.parametrize("cardinality", [1_000, 20_000, 100_000])
def test_distinct_count_within_two_percent(cardinality):
    for seed in range(3):
        values = [f"s{seed}-{i}" for i in range(cardinality)] * 2
        parts = [sketch_of(values[i::4], batch=5_000) for i in range(4)]
        merged = CategoricalSketch()
        for p in parts:
            merged.merge(p)
        one = sketch_of(values, batch=5_000)
        for s in (one, merged):
            assert abs(s.distinct / cardinality - 1) <= 0.02, (seed, s.distinct)


def test_merge_and_round_trip_across_modes():
    exact = sketch_of(["a"] * 10 + ["b"])
    big = sketch_of([f"v{i}" for i in range(MAX_EXACT_CATEGORIES + 50)] + ["a"] * 100)
    for left, right in ((exact, big), (big, exact)):
        m = CategoricalSketch.from_dict(left.to_dict())
        m.merge(CategoricalSketch.from_dict(right.to_dict()))
        assert not m.is_exact and m.count == exact.count + big.count
        assert m.frequencies(1) == {"a": 110} and m.count_interval("b")[1] >= 1
        assert m.estimate("never") == 0
    assert exact.is_exact and exact.count == 11  # merge leaves its argument alone


def test_point_estimate_does_not_depend_on_the_order_of_arrival():
    """20 categories of 10 values each among 200,000 distinct values: fed last, shuffled, or
    merged from partial sketches, every estimate is the same, in its documented interval
    [c - N / w, c + eps N], and unbiased within noise (the estimates' sd is ~20 here, so the
    mean of 20 is within 15 of 10 at > 3 sd). The frequent-items counter gave 270 fed last
    and 0 shuffled (order-dependent, and 27 times the count)."""
    rng = np.random.default_rng(3)
    rare = [f"rare{k}" for k in range(20)]
    values = [f"v{i}" for i in range(200_000)] + rare * 10
    orders = {"rare last": values, "rare first": values[200_000:] + values[:200_000],
              "shuffled": [values[i] for i in rng.permutation(len(values))]}
    sketches = {name: sketch_of(v) for name, v in orders.items()}
    halves = [sketch_of(orders["shuffled"][i::2]) for i in range(2)]
    for name, parts in (("merged", halves), ("merged reversed", halves[::-1])):
        m = CategoricalSketch()
        for p in parts:
            m.merge(p)
        sketches[name] = m
    estimates = {name: [s.estimate(v) for v in rare] for name, s in sketches.items()}
    first = estimates["rare last"]
    assert all(e == first for e in estimates.values()), estimates
    s = sketches["shuffled"]
    assert all(10 - s.count / 512 <= e <= 10 + s.cms_error for e in first)
    assert abs(np.mean(first) - 10) <= 15


@pytest.mark.parametrize("column", [
    ["a", "b", None, "a", ""],
    ["\x1fbool:true", "true", None, "\x1fint:1"],  # strings that look like tagged keys stay strings
    [f"v{i % 1_500}" for i in range(3_000)] + [None] * 7,  # leaves exact mode, fills the pending input
])
def test_validated_string_columns_count_as_unhinted_ones(column):
    """The counting path taken when the validator's types are given (strings and None only),
    with or without its distinct values, gives the same profile as the type-scanning path,
    batch after batch."""
    from sdk.columns import _distinct, _feature_types
    from sketches.feature import FeatureProfile

    hinted, deduped, plain = FeatureProfile(), FeatureProfile(), FeatureProfile()
    for _ in range(3):
        hinted.update(column, _feature_types(column))
        deduped.update(column, _feature_types(column), _distinct(column))
        plain.update(column)
    assert hinted.to_dict() == plain.to_dict() == deduped.to_dict()
    assert hinted.missing == column.count(None) * 3
    assert hinted.categorical.count == (len(column) - column.count(None)) * 3
    if len(column) < 10:
        assert hinted.categorical.frequencies() == plain.categorical.frequencies()
        assert "\x1fbool:true" not in hinted.categorical.frequencies() or column[0] != "\x1fbool:true"


@pytest.mark.parametrize("entries, codes", [
    (["a", None, "b"], [0, 1, 0, 2, 0, 1] * 20),
    (["a", "b", "a", None, "a"], [0, 1, 2, 2, 3, 4, 1] * 20),  # an entry listed three times
    (["a", "b", None, "unused", "never"], [0, 0, 1, 2, 1] * 30),  # entries no value uses
    (["b", "a", None], [1, 0, 2, 0] * 40),  # a dictionary in another order than the values'
    ([f"v{i}" for i in range(300)] + [None], [i * 7 % 301 for i in range(5_000)]),  # 2-byte codes
    ([f"v{i}" for i in range(1_500)], [i % 1_500 for i in range(3_200)]),  # leaves exact mode
    ([f"v{i}" for i in range(300)], [0, 1, 299, 2] * 200),  # codes past the next entry
    ([f"v{i}" for i in range(300)], [299, 5, 299, 17]),  # a few rows of a larger column
])
def test_a_dictionary_column_counts_as_its_values_one_by_one(entries, codes):
    """A packed column (counted per dictionary entry when its dictionary lists its values in
    order of first occurrence, as the SDK's do) gives the profile of the same values counted
    one by one, batch after batch: the same bytes, categories in the same order."""
    from array import array

    from sdk.packed import DictionaryColumn
    from sketches.feature import FeatureProfile

    col = DictionaryColumn(entries, array("B" if len(entries) <= 256 else "H", codes))
    values = list(col)
    packed, one_by_one = FeatureProfile(), FeatureProfile()
    for _ in range(3):
        packed.update(col)
        one_by_one.update(values)
    assert packed.to_dict() == one_by_one.to_dict()
    assert packed.missing == values.count(None) * 3
    assert packed.categorical.count == (len(values) - values.count(None)) * 3
    table, want = packed.categorical._table(), one_by_one.categorical._table()
    assert list(table.items()) == list(want.items())  # key order too, and nothing of count 0


def test_count_entries_refuses_counts_of_another_length_before_counting():
    s = CategoricalSketch()
    for entries, counts in ((["a", "b", "c"], [1, 0]), (["a"], [5, 1])):
        with pytest.raises(ValueError, match="dictionary entries"):
            s.count_entries(entries, counts)
    assert s.count == 0 and s.exact == {}
