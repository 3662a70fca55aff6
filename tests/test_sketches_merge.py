"""Merge invariance, property-based: any split of a stream into partial profiles, merged in any
order and shape (some parts through their serialized form), equals the one-pass profile.

Equal means: counts, missing, infinities, versions, min and max exactly; mean and M2 up to
float rounding; exact tables (numeric <= 64 values, categorical <= MAX_EXACT_CATEGORIES categories) exactly;
sketches within their documented bounds of the truth on the raw data (CDF within
``rank_error``, count intervals containing the true counts, distinct counts within 2 %).
Streams hold up to 300 values (the digest is lossless, so exact), 301 to 3,000, or 11,000 to
14,000 values.

A seeded stress test then runs the numeric sketch alone over many small streams (301 to 3,000
values, where ``rank_error`` is tightest relative to a centroid's weight) and over three-mode
streams of 10,000 to 100,000 values, split 2 to 4 ways, each part left buffered, compressed,
or sent through bytes, merged in random order and shape.
"""

from __future__ import annotations

from collections import Counter
from functools import reduce

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk.columns import RecordColumns
from sketches.categorical import MAX_EXACT_CATEGORIES, category_key
from sketches.codec import decode, encode
from sketches.numeric import TDIGEST_RANK_ERROR, NumericSketch
from sketches.profile import WindowProfile

P = np.arange(1, 100) / 100


@st.composite
def scenarios(draw):
    n = draw(st.one_of(st.integers(0, 300), st.integers(301, 3_000), st.integers(11_000, 14_000)))
    parts = draw(st.integers(1, 8))
    batches = [7, 5_000] if n <= 300 else [500, 5_000]
    return {
        "seed": draw(st.integers(0, 2**32 - 1)),
        "n": n,
        "dist": draw(st.sampled_from(["normal", "lognormal", "bimodal", "extreme"])),
        "int_range": draw(st.integers(1, 100)),
        "categories": draw(st.integers(1, 600)),
        "cuts": sorted(draw(st.lists(st.integers(0, n), min_size=parts - 1, max_size=parts - 1))),
        "order": draw(st.permutations(range(parts))),
        "balanced": draw(st.booleans()),
        "via_bytes": draw(st.lists(st.booleans(), min_size=parts, max_size=parts)),
        "batch": draw(st.sampled_from(batches)),
    }


def stream(sc) -> RecordColumns:
    rng = np.random.default_rng(sc["seed"])
    n = sc["n"]
    x = {"normal": rng.normal(size=n), "lognormal": rng.lognormal(0, 2, n),
         "bimodal": np.where(rng.uniform(size=n) < 0.4, rng.normal(-5, 1, n), rng.normal(5, 0.5, n)),
         "extreme": rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-300, 300, n)}[sc["dist"]]
    special = rng.choice([np.nan, np.inf, -np.inf], n)
    x = np.where(rng.uniform(size=n) < 0.03, special, x).tolist()
    k = rng.integers(0, sc["int_range"], n).tolist()
    c = [f"c{j}" for j in (rng.zipf(1.3, n) % sc["categories"]).tolist()]
    mixed = rng.choice(np.array(["a", "b", 1.5, True, 7, None], dtype=object), n).tolist()
    none = rng.uniform(size=(3, n)) < 0.05
    features = {
        "x": [None if m else v for v, m in zip(x, none[0], strict=True)],
        "k": [None if m else v for v, m in zip(k, none[1], strict=True)],
        "c": [None if m else v for v, m in zip(c, none[2], strict=True)],
        "mixed": mixed,
    }
    return RecordColumns(
        "m", rng.choice(["1", "2"], n).tolist(), [str(i) for i in range(n)], [0.0] * n, features,
        score=rng.uniform(size=n).tolist(), predicted_label=rng.choice([0, 1], n).tolist(),
        slices={"country": rng.choice(np.array(["DE", "FR", "US", None], dtype=object), n).tolist()},
        latency_ms=rng.exponential(5.0, n).tolist(),
    )


def profile_of(cols: RecordColumns, rows: range, batch: int) -> WindowProfile:
    p = WindowProfile("m", 0, 300)
    for start in range(rows.start, rows.stop, batch):
        idx = np.arange(start, min(start + batch, rows.stop))
        p.add_columns(RecordColumns(
            "m", [cols.model_version[i] for i in idx], [cols.prediction_id[i] for i in idx],
            [0.0] * idx.size, {k: [v[i] for i in idx] for k, v in cols.features.items()},
            score=[cols.score[i] for i in idx], predicted_label=[cols.predicted_label[i] for i in idx],
            slices={k: [v[i] for i in idx] for k, v in cols.slices.items()},
            latency_ms=[cols.latency_ms[i] for i in idx]))
    return p


def assert_numeric_matches(merged: NumericSketch, one: NumericSketch, column: list) -> None:
    raw = np.array([v for v in column if v is not None], dtype=float)  # None is counted apart
    finite = raw[np.isfinite(raw)]
    expected = (finite.size, np.isnan(raw).sum())
    assert (merged.count, merged.null_count) == (one.count, one.null_count) == expected
    assert (merged.pos_inf_count, merged.neg_inf_count) == (one.pos_inf_count, one.neg_inf_count)
    assert merged.is_exact == one.is_exact
    if not finite.size:
        return
    assert merged.min == one.min == finite.min() and merged.max == one.max == finite.max()
    assert np.isclose(merged.mean, one.mean, rtol=1e-9, atol=1e-300)
    assert np.isclose(merged.m2, one.m2, rtol=1e-6, atol=1e-300) or merged.m2 == one.m2 == np.inf
    sorted_raw = np.sort(finite)
    if one.exact is not None:
        assert merged.exact == one.exact == Counter(finite.tolist())
        return
    if one.is_exact:  # the values kept (raw mode): the empirical CDF exactly
        support = np.unique(finite)
        truth = np.searchsorted(sorted_raw, support, side="right") / finite.size
        assert np.array_equal(merged.support(), support) and np.array_equal(one.support(), support)
        for s in (merged, one):
            assert np.array_equal(s.cdf_many(support), truth)
        return
    points = np.quantile(finite, P, method="inverted_cdf")
    truth = np.searchsorted(sorted_raw, points, side="right") / finite.size
    for s in (merged, one):
        assert np.max(np.abs(s.cdf_many(points) - truth)) <= s.rank_error + 1e-12
        assert np.all(np.diff([s.quantile(p) for p in P]) >= 0)


@settings(max_examples=30, deadline=None, derandomize=True)  # the same 30 cases on every run
@given(scenarios())
def test_any_split_merged_in_any_order_equals_one_pass(sc):
    check_split_merge(sc)


def test_merged_small_extreme_digests_stay_within_rank_error(monkeypatch):
    """Regression: 604 buffered values merged with a compressed, serialized digest of 305 values
    spread over 1e-300..1e300 gave rank error 0.0097 > rank_error 0.0083 (now 0.0032; one pass:
    0.0021). Found by the property test above with a random seed."""
    monkeypatch.setattr("sketches.numeric.MAX_EXACT_VALUES", 0)  # the digest, not the values kept
    check_split_merge({"seed": 3834, "n": 993, "dist": "extreme", "int_range": 2, "categories": 1,
                       "cuts": [0, 0, 666], "order": [0, 1, 2, 3], "balanced": False,
                       "via_bytes": [False, False, False, True], "batch": 500})


def check_split_merge(sc) -> None:
    cols = stream(sc)
    n = sc["n"]
    one = profile_of(cols, range(n), sc["batch"])
    bounds = [0, *sc["cuts"], n]
    parts = [profile_of(cols, range(a, b), sc["batch"]) for a, b in zip(bounds, bounds[1:], strict=False)]
    parts = [WindowProfile.from_bytes(p.to_bytes()) if rt else p
             for p, rt in zip(parts, sc["via_bytes"], strict=True)]
    ordered = [parts[i] for i in sc["order"]]
    while sc["balanced"] and len(ordered) > 1:
        ordered = [a.merge(b) for a, b in zip(ordered[::2], ordered[1::2], strict=False)] + (
            [ordered[-1]] if len(ordered) % 2 else [])
    merged = reduce(WindowProfile.merge, ordered[1:], ordered[0])

    assert merged.count == one.count == n
    if not n:
        assert merged.is_empty and not merged.features
        return
    assert merged.versions == one.versions == Counter(cols.model_version)
    assert set(merged.features) == set(one.features)
    for name, f in one.features.items():
        g = merged.features[name]
        assert (g.missing, g.null_count, g.inf_count, g.kind, g.type_mismatch_count) == (
            f.missing, f.null_count, f.inf_count, f.kind, f.type_mismatch_count)
        assert g.categorical.count == f.categorical.count
    for name in ("x", "k"):
        assert_numeric_matches(merged.features[name].numeric, one.features[name].numeric, cols.features[name])
    assert_numeric_matches(merged.score, one.score, cols.score)
    truth = Counter(v for v in cols.features["c"] if v is not None)
    for s in (merged.features["c"].categorical, one.features["c"].categorical):
        assert s.is_exact == (len(truth) <= MAX_EXACT_CATEGORIES)
        if s.is_exact:
            assert s.exact == truth
        else:
            assert all(s.count_interval(v)[0] <= c <= s.count_interval(v)[1] for v, c in truth.items())
            assert abs(s.distinct / len(truth) - 1) <= 0.02
        assert s.estimate("never-seen") == 0 and set(s.frequencies()) <= set(truth)
    assert merged.prediction.exact == one.prediction.exact == Counter(map(category_key, cols.predicted_label))
    by_country = Counter(v for v in cols.slices["country"] if v is not None)
    for p in (merged, one):
        subs = p.slices["country"].profiles
        assert {k: s.count for k, s in subs.items()} == dict(by_country)
        for k, s in subs.items():
            scores = np.array([v for v, c in zip(cols.score, cols.slices["country"], strict=True) if c == k])
            assert (s.score.count, s.score.min, s.score.max) == (scores.size, scores.min(), scores.max())


STRESS = {  # data: (seeds, smallest and largest stream)
    "extreme": (400, 301, 3_000), "extreme_positive": (400, 301, 3_000), "normal": (60, 301, 3_000),
    "lognormal": (60, 301, 3_000), "bimodal": (60, 301, 3_000), "three_modes": (40, 10_000, 100_000),
}


def stress_stream(dist: str, rng: np.random.Generator) -> np.ndarray:
    n = int(rng.integers(STRESS[dist][1], STRESS[dist][2] + 1))
    return {
        "extreme": lambda: rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(-300, 300, n),
        "extreme_positive": lambda: 10.0 ** rng.uniform(-300, 300, n),
        "normal": lambda: rng.normal(size=n),
        "lognormal": lambda: rng.lognormal(0, 2, n),
        "bimodal": lambda: np.where(rng.uniform(size=n) < 0.4, rng.normal(-5, 1, n), rng.normal(5, 0.5, n)),
        "three_modes": lambda: rng.choice([-10.0, 0.0, 10.0], n) + rng.normal(size=n),
    }[dist]()


def split_and_merge(x: np.ndarray, rng: np.random.Generator) -> NumericSketch:
    """``x`` split at random into 2-4 parts, each built in random batches and then left
    buffered, compressed, or sent through bytes; merged in random order, one by one or
    pairwise."""
    parts = []
    for chunk in np.split(x, np.sort(rng.integers(0, x.size + 1, int(rng.integers(1, 4))))):
        s = NumericSketch()
        for batch in np.array_split(chunk, max(1, chunk.size // int(rng.choice([7, 100, 500, 5_000])))):
            s.update(batch)
        how = rng.integers(3)
        if how == 1:
            s.cdf(0.0)  # compresses the buffered values
        elif how == 2:
            s = NumericSketch.from_dict(decode(encode(s.to_dict())))  # what WindowProfile.to_bytes does
        parts.append(s)
    parts = [parts[i] for i in rng.permutation(len(parts))]
    pairwise = bool(rng.integers(2))
    while len(parts) > 1:
        if pairwise:
            for a, b in zip(parts[::2], parts[1::2], strict=False):
                a.merge(b)
            parts = parts[::2]
        else:
            parts[0].merge(parts.pop(1))
    return parts[0]


@pytest.mark.parametrize("dist", list(STRESS))
def test_streams_split_and_merged_stay_within_rank_error(dist, monkeypatch):
    """Seeded stress test of merge invariance: every seed must stay within ``rank_error`` of
    the truth on the raw data (numpy's inverted-CDF quantiles at p1..p99), quantiles monotone.

    Small streams are where the bound is tightest (0.5 % + 3 / n with centroids of about 1 %
    of n); three well-separated modes are where merged centroids used to bridge the gaps.
    Before the fix 5 of the 800 extreme-magnitude seeds broke the bound (worst 1.51 x the
    bound) and 2 of the 40 three-mode seeds (1.19 x); now the worst of any data here is 0.67 x.
    """
    monkeypatch.setattr("sketches.numeric.MAX_EXACT_VALUES", 0)  # the digest, not the values kept
    worst = 0.0
    for seed in range(STRESS[dist][0]):
        rng = np.random.default_rng(seed)
        x = stress_stream(dist, rng)
        s = split_and_merge(x, rng)
        assert (s.count, s.min, s.max) == (x.size, x.min(), x.max()) and not s.is_exact
        points = np.quantile(x, P, method="inverted_cdf")
        truth = np.searchsorted(np.sort(x), points, side="right") / x.size
        err = float(np.max(np.abs(s.cdf_many(points) - truth)))
        assert s.rank_error == pytest.approx(TDIGEST_RANK_ERROR + 3 / x.size)
        assert err <= s.rank_error, f"seed {seed}: n = {x.size}, error {err:.5f} > {s.rank_error:.5f}"
        assert np.all(np.diff([s.quantile(p) for p in P]) >= 0), f"seed {seed}: quantiles not monotone"
        worst = max(worst, err / s.rank_error)
    assert worst > 0.3  # the check is live: merged sketches do err, by a good part of the bound
