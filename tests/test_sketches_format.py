"""Serialized profiles: the golden files of formats 2 to 6 keep reading, bad bytes are refused,
and a 20-feature window profile is small.

The golden file tests/golden/profile_v2.fwp was written by :func:`golden_profile` with format 2,
tests/golden/profile_v3.fwp by :func:`golden_profile_v3` with format 3, profile_v4.fwp by
:func:`golden_profile_v4` with format 4, profile_v5.fwp by :func:`golden_profile_v5` with format
5, profile_v6.fwp by :func:`golden_profile_v6` with format 6, as a checkpoint writes it (``python
tests/test_sketches_format.py`` writes the current format's file; do that only when adding a new
golden file for a new format, never to make this test pass). The expected values below were
computed from the raw data when the file was written, so the test does not depend on
regenerating the data.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sdk.columns import RecordColumns
from sketches.bins import SCORE_EDGES, BinCounts, derive_edges, edge_version
from sketches.codec import PROFILE_FORMAT_VERSION
from sketches.numeric import TDIGEST_RANK_ERROR
from sketches.profile import WindowProfile

GOLDEN = Path(__file__).parent / "golden" / "profile_v2.fwp"
GOLDEN_V3 = Path(__file__).parent / "golden" / "profile_v3.fwp"
GOLDEN_V4 = Path(__file__).parent / "golden" / "profile_v4.fwp"
GOLDEN_V5 = Path(__file__).parent / "golden" / "profile_v5.fwp"
GOLDEN_V6 = Path(__file__).parent / "golden" / "profile_v6.fwp"


def golden_profile(bins: bool = False) -> WindowProfile:
    """2,000 records: continuous, integer-coded, high- and low-cardinality, mixed, and sliced;
    with ``bins``, "amount" and the score also counted in 20 quantile bins of a lognormal
    reference of 5,000 values (seed 7), and a continuous feature of 3,000 values."""
    rng = np.random.default_rng(20_260_101)
    n = 2_000
    x = rng.lognormal(0, 1, n)
    x[::50] = np.nan
    features = {
        "amount": x,
        "items": rng.integers(0, 5, n).tolist(),
        "merchant": [f"m{i}" for i in rng.integers(0, 400, n)],
        "channel": rng.choice(np.array(["web", "app", None], dtype=object), n).tolist(),
        "mixed": rng.choice(np.array(["a", 2.5, True, None], dtype=object), n).tolist(),
    }
    cols = RecordColumns("golden", rng.choice(["v1", "v2"], n).tolist(), [str(i) for i in range(n)],
                         [0.0] * n, features, score=rng.uniform(size=n).tolist(),
                         predicted_label=rng.choice(["yes", "no"], n).tolist(),
                         slices={"country": rng.choice(["DE", "FR", "US", "IT"], n).tolist()},
                         latency_ms=rng.exponential(10.0, n).tolist())
    templates = {}
    if bins:
        ref = np.random.default_rng(7).lognormal(0, 1, 5_000)
        templates = {"amount": BinCounts(derive_edges(ref, 20)),
                     SCORE_EDGES: BinCounts(derive_edges(np.linspace(0, 1, 101), 20))}
        cols.features["wide"] = np.concatenate([rng.normal(size=1_500), np.full(500, np.nan)])
    p = WindowProfile("golden", 1_767_225_600, 300, slice_features=["amount"], max_slice_values=3,
                      bins=templates)
    p.add_columns(cols)
    if bins:
        p.add_columns(RecordColumns("golden", ["v1"] * 1_000, [str(i) for i in range(n, n + 1_000)],
                                    [0.0] * 1_000, {"wide": rng.normal(size=1_000)}))
    return p


def golden_profile_v3() -> WindowProfile:
    """The profile of :func:`golden_profile` with bins."""
    return golden_profile(bins=True)


def golden_profile_v4() -> WindowProfile:
    """The profile of :func:`golden_profile` with bins; format 4 adds its co-moments."""
    return golden_profile(bins=True)


def golden_profile_v5() -> WindowProfile:
    """The profile of :func:`golden_profile_v4`, with a 384-d vector feature "embedding" (a
    standard normal + 0.5 in every component, float32, every 10th record without one) and an
    8-d "small" (kept whole) in 2,000 more records."""
    p = golden_profile_v4()
    rng = np.random.default_rng(20_261_201)
    n = 2_000
    emb = (rng.standard_normal((n, 384)) + 0.5).astype("<f4")
    small = rng.uniform(-1, 1, (n, 8)).astype("<f4")
    cols = RecordColumns("golden", ["v1"] * n, [f"e{i}" for i in range(n)], [0.0] * n, {})
    cols.vectors = {"embedding": [None if i % 10 == 0 else emb[i].tobytes() for i in range(n)],
                    "small": [small[i].tobytes() for i in range(n)]}
    p.add_columns(cols)
    return p


def golden_profile_v6() -> WindowProfile:
    """The profile of :func:`golden_profile_v5` with 1,000 more values of "wide" (standard
    normals, seed 20,261,202), so that its digest holds 3,500 buffered values; written as a
    checkpoint writes it (``to_bytes(fast=True)``: the buffer uncompressed, in ``"buf"``)."""
    p = golden_profile_v5()
    rng = np.random.default_rng(20_261_202)
    n = 1_000
    p.add_columns(RecordColumns("golden", ["v1"] * n, [f"w{i}" for i in range(n)], [0.0] * n,
                                {"wide": rng.normal(size=n)}))
    return p


def test_golden_profile_of_format_6_reads_back_with_the_digest_buffer():
    data = GOLDEN_V6.read_bytes()
    assert data[:4] == b"FWP" + bytes([6]) and data[4:8] == b"\x28\xb5\x2f\xfd"  # a Zstandard frame
    p = WindowProfile.from_bytes(data)
    assert p.count == 6_000
    wide = p.features["wide"]
    assert (wide.numeric.count, wide.null_count) == (3_500, 2_500)
    td = wide.numeric._td
    assert td._buffered == 3_500 and td._values[0].size == 3_500  # read back into the buffer
    # of the 3,500 buffered values, from the raw data when the file was written
    assert float(td._values[0].sum()) == pytest.approx(-25.728537423286838, abs=1e-9)
    assert td.total_weight == 3_500 and td._buffered == 0
    five = WindowProfile.from_bytes(GOLDEN_V5.read_bytes())  # the format-5 content is unchanged
    assert p.features["amount"].numeric.to_dict() == five.features["amount"].numeric.to_dict()
    emb, emb5 = p.vectors["embedding"], five.vectors["embedding"]
    assert (emb.count, emb.nulls, emb.mean.tolist()) == (emb5.count, emb5.nulls + 1_000, emb5.mean.tolist())


def test_golden_profile_of_format_5_reads_back_with_vectors_and_co_moments():
    data = GOLDEN_V5.read_bytes()
    assert data[:4] == b"FWP" + bytes([5])
    p = WindowProfile.from_bytes(data)
    assert p.count == 5_000 and p.vectors.keys() == {"embedding", "small"}
    emb = p.vectors["embedding"]
    # from the raw data when the file was written
    assert (emb.dim, emb.k, emb.seed, emb.count, emb.nulls) == (384, 32, 20_230_917, 1_800, 3_200)
    assert emb.mean[:3].round(6).tolist() == [0.52302, 0.506631, 0.549838]
    assert round(emb.norms.mean, 5) == 21.90975
    assert emb.sample.shape == (256, 32) and emb.bins.sum() == 1_800 * 32
    small = p.vectors["small"]
    assert (small.k, small.count, small.nulls) == (8, 2_000, 3_000)
    assert small.mean.round(6).tolist()[:2] == [-0.003388, -0.003357]
    assert p.features["amount"].numeric.count == 1_960  # the format-3 content is unchanged
    four = WindowProfile.from_bytes(GOLDEN_V4.read_bytes())  # and the format-4 co-moments
    assert p.comoments is not None and p.comoments.names == four.comoments.names
    assert WindowProfile.from_bytes(p.to_bytes()).vectors["embedding"].to_dict() == emb.to_dict()
    assert four.vectors == {}


def test_golden_profile_of_format_3_reads_back_with_bins_and_kept_values():
    data = GOLDEN_V3.read_bytes()
    assert data[:4] == b"FWP" + bytes([3])
    p = WindowProfile.from_bytes(data)
    assert p.count == 3_000
    assert p.features.keys() == {"amount", "items", "merchant", "channel", "mixed", "wide"}
    amount = p.features["amount"].numeric
    assert (amount.count, amount.null_count) == (1960, 40)
    assert amount.is_exact and amount.rank_error == 0.0  # 1,960 values <= MAX_EXACT_VALUES: kept
    truth = {0.5: 0.2393, 1.0: 0.5020, 2.0: 0.7643, 5.0: 0.9418}  # F_n(x) of the raw data
    for v, f in truth.items():
        assert abs(amount.cdf(v) - f) <= 1e-4
    # counted from the raw data with (lo < x <= hi) per bin when the file was written
    assert amount.bins.counts.tolist() == [
        92, 95, 103, 96, 81, 117, 98, 93, 95, 95, 88, 94, 105, 115, 115, 77, 101, 89, 109, 102]
    assert amount.bins.version == edge_version(amount.bins.edges) == "980fc59605ba"
    assert amount.bins.edges.size == 19 and not amount.bins.source
    assert p.score.bins.total == 2_000 and p.score.bins.counts.size == 20
    wide = p.features["wide"].numeric
    assert (wide.count, wide.null_count, wide.is_exact, wide.bins) == (2_500, 500, False, None)
    assert p.slices["country"].profiles["IT"].features["amount"].numeric.bins is None
    assert p.features["items"].numeric.exact == {0.0: 382, 1.0: 420, 2.0: 403, 3.0: 400, 4.0: 395}
    again = WindowProfile.from_bytes(p.to_bytes())
    for name in ("amount", "wide", "items"):
        assert again.features[name].numeric.to_dict() == p.features[name].numeric.to_dict()
    assert again.score.to_dict() == p.score.to_dict()


def test_golden_profile_of_format_4_reads_back_with_co_moments():
    data = GOLDEN_V4.read_bytes()
    assert data[:4] == b"FWP" + bytes([4])
    p = WindowProfile.from_bytes(data)
    assert p.count == 3_000 and p.features["amount"].numeric.bins.total == 1_960
    c = p.comoments
    # numeric columns of the first batch, by name; rows complete in all three (computed
    # with numpy from the raw data when the file was written)
    assert c.names == ("amount", "items", "wide")
    assert (c.n, c.excluded) == (1_470, 1_530)
    assert c.mean == pytest.approx([1.6332093208542695, 1.9952380952380953, 0.024759068227737997],
                                   rel=1e-12)
    assert c.covariance() == pytest.approx(np.array(
        [[4.109337635230986, -0.1551082418476157, -0.017481136901870163],
         [-0.1551082418476157, 1.9353074653959574, -0.011239203200643932],
         [-0.017481136901870163, -0.011239203200643932, 1.047223761058165]]), rel=1e-12)
    assert c.kurtosis() == pytest.approx([37.43188216442758, 1.7374076112165473, 3.0983352415815704],
                                         rel=1e-12)  # scipy.stats.kurtosis(fisher=False)
    assert p.slices["country"].profiles["IT"].comoments is None  # slices keep none


def test_profile_of_format_3_has_no_co_moments_and_drops_them_from_a_merge():
    old = WindowProfile.from_bytes(GOLDEN_V3.read_bytes())
    assert old.comoments is None
    new = WindowProfile.from_bytes(GOLDEN_V4.read_bytes())
    assert new.merge(old).comoments is None  # the block would no longer describe all rows
    assert new.count == 6_000


def test_golden_profile_of_format_2_reads_back():
    p = WindowProfile.from_bytes(GOLDEN.read_bytes())
    assert (p.model_id, p.window_start, p.window_seconds, p.count) == ("golden", 1_767_225_600, 300, 2000)
    assert p.versions == {"v1": 1020, "v2": 980}
    amount = p.features["amount"].numeric
    assert (amount.count, amount.null_count) == (1960, 40) and not amount.is_exact
    assert (amount.min, amount.max) == (0.015114676404729991, 29.3927929759018)
    truth = {0.5: 0.2393, 1.0: 0.5020, 2.0: 0.7643, 5.0: 0.9418}  # F_n(x) of the raw data
    for v, f in truth.items():
        assert abs(amount.cdf(v) - f) <= TDIGEST_RANK_ERROR + 1e-4
    assert p.features["items"].numeric.exact == {0.0: 382, 1.0: 420, 2.0: 403, 3.0: 400, 4.0: 395}
    merchant = p.features["merchant"].categorical
    assert not merchant.is_exact and merchant.count == 2000 and merchant.frequency_error == 0
    assert merchant.frequencies(2) == {"m304": 14, "m162": 12}
    assert merchant.distinct == pytest.approx(397, rel=0.02)  # 397 distinct merchants in the data
    channel = p.features["channel"]
    assert channel.categorical.exact == {"app": 682, "web": 636} and channel.null_count == 682
    mixed = p.features["mixed"]
    assert (mixed.numeric.count, mixed.categorical.exact, mixed.null_count) == (
        504, {"a": 509, "true": 471}, 516)
    assert p.prediction.exact == {"yes": 1002, "no": 998}
    assert p.score.count == 2000 and p.latency.count == 2000
    country = p.slices["country"]
    assert {k: s.count for k, s in country.profiles.items()} == {"IT": 512, "US": 503, "FR": 497,
                                                                  "__other__": 488}
    assert country.capped_records == 488 and country.profiles["IT"].features.keys() == {"amount"}


def test_bad_bytes_are_refused_with_a_reason():
    good = GOLDEN_V6.read_bytes()
    assert good[:4] == b"FWP" + bytes([PROFILE_FORMAT_VERSION])
    for bad, reason in ((b"\x8b\xa3fmt\x01", "format 1"), (good[:40], "corrupt"),
                        (good[:3] + b"\x09" + good[4:], "unknown profile format 9")):
        with pytest.raises(ValueError, match=reason):
            WindowProfile.from_bytes(bad)


def test_twenty_feature_window_profile_is_small():
    """10 numeric and 10 categorical features (1,000 categories each), 100k records in one window."""
    rng = np.random.default_rng(5)
    n = 100_000
    names = np.array([f"value_{i:04d}" for i in range(1_000)])
    numeric = {f"num_{i}": d for i, d in enumerate([
        rng.normal(size=n), rng.lognormal(0, 2, n), rng.uniform(size=n), rng.exponential(size=n),
        rng.normal(1e6, 1e3, n), rng.integers(0, 5_000, n).astype(float), rng.pareto(2.0, n),
        np.where(rng.uniform(size=n) < 0.7, 0.0, rng.lognormal(0, 1, n)), 10.0 ** rng.uniform(-300, 300, n),
        np.where(rng.uniform(size=n) < 0.5, rng.normal(-3, 1, n), rng.normal(3, 0.5, n))])}
    categorical = {f"cat_{i}": names[rng.zipf(1.2, n) % 1_000 if i % 2 else rng.integers(0, 1_000, n)]
                   for i in range(10)}
    columns = {k: v.tolist() for k, v in (numeric | categorical).items()}
    p = WindowProfile("model-1", 1_700_000_100, 300)
    for s in range(0, n, 1_000):
        feats = {k: v[s:s + 1_000] for k, v in numeric.items()}
        feats |= {k: columns[k][s:s + 1_000] for k in categorical}
        p.add_columns(RecordColumns("model-1", ["1"] * 1_000, [""] * 1_000, [0.0] * 1_000, feats))
    size = len(p.to_bytes())
    raw_json = sum(len(json.dumps({"model_id": "model-1", "model_version": "1", "prediction_id": f"p{i}",
                                   "event_time": 1_700_000_100.0 + i * 1e-3,
                                   "features": dict(zip(columns, row, strict=True))})) + 1
                   for i, row in enumerate(zip(*columns.values(), strict=True)))
    assert size <= 100 * 1024
    assert raw_json / size >= 500


if __name__ == "__main__":
    GOLDEN_V6.parent.mkdir(exist_ok=True)
    GOLDEN_V6.write_bytes(golden_profile_v6().to_bytes(fast=True))
    print(f"wrote {GOLDEN_V6} ({GOLDEN_V6.stat().st_size} bytes)")
