"""Exact reference bins: binned PSI/JS/KS/Wasserstein read exact counts (no sketch error), are
calibrated under H0, merge like one pass, fall back to the digests when the edges differ, and
small windows keep their values (raw-data tests)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from detectors.drift.binned import aligned_bins
from detectors.drift.js import js_test
from detectors.drift.ks import ks_test
from detectors.drift.psi import psi, psi_from_masses
from detectors.drift.wasserstein import wasserstein_test
from detectors.result import Status
from sdk.columns import RecordColumns
from sketches.bins import BinCounts, derive_edges
from sketches.numeric import MAX_EXACT_VALUES, NumericSketch
from sketches.profile import WindowProfile


def reference(values: np.ndarray) -> NumericSketch:
    """A reference sketch counted in the edges derived from its own values (as at upload)."""
    s = NumericSketch.binned(BinCounts(derive_edges(values), source=True))
    s.update(values)
    return s


def window(values: np.ndarray, ref: NumericSketch, batch: int = 1_000) -> NumericSketch:
    s = NumericSketch.binned(ref.bins.empty_like())
    for part in np.array_split(values, max(1, values.size // batch)):
        s.update(part)
    return s


def test_binned_psi_is_psi_of_the_raw_data_at_the_reference_deciles():
    rng = np.random.default_rng(1)
    raw_ref, raw_cur = rng.lognormal(size=100_000), rng.lognormal(0.02, 1.0, 50_000)
    ref = reference(raw_ref)
    cur = window(raw_cur, ref)
    assert not cur.is_exact and cur.rank_error > 0  # a digest: the bins are what is exact
    deciles = np.quantile(raw_ref, np.arange(1, 10) / 10, method="inverted_cdf")
    r = np.diff(np.searchsorted(np.sort(raw_ref), deciles, side="right"), prepend=0, append=raw_ref.size)
    c = np.diff(np.searchsorted(np.sort(raw_cur), deciles, side="right"), prepend=0, append=raw_cur.size)
    expected = psi_from_masses(r / raw_ref.size, c / raw_cur.size, raw_ref.size, raw_cur.size)
    got = psi(ref, cur)
    assert got.statistic == pytest.approx(expected, rel=1e-12) and got.error_bound == 0.0


def test_vanished_decile_is_psi_drift_at_every_size():
    """U(0, 1) x n against U(0, 0.9) x 0.9 n: drift with the default floor whatever n >= 1,000
    (raw-data path at 1,000, exact bins above). PSI is 0.5-1: the last decile's current mass is
    0 or the few values between the reference's 0.9 quantile and 0.9, floored at 0.5 / n."""
    rng = np.random.default_rng(2)
    for n in (1_000, 10_000, 100_000):
        ref = reference(rng.uniform(0, 1, n))
        cur = window(rng.uniform(0, 0.9, int(0.9 * n)), ref)
        r = psi(ref, cur, floor=0.2)
        assert r.status == Status.DRIFT and r.error_bound == 0.0 and r.statistic > 0.4, (n, r)


def test_binned_ks_is_the_raw_distance_at_the_edges_and_calibrated():
    rng = np.random.default_rng(3)
    raw_ref, raw_cur = rng.normal(size=20_000), rng.normal(0.03, 1, 20_000)
    ref = reference(raw_ref)
    cur = window(raw_cur, ref)
    edges = ref.bins.edges
    at = np.abs(np.searchsorted(np.sort(raw_ref), edges, side="right") / raw_ref.size
                - np.searchsorted(np.sort(raw_cur), edges, side="right") / raw_cur.size)
    r = ks_test(ref, cur)
    assert r.statistic == pytest.approx(at.max(), abs=1e-15) and r.error_bound == 0.0
    assert r.statistic <= stats.ks_2samp(raw_ref, raw_cur).statistic  # the edges are raw points
    # H0: 600 pairs of 4,000 values, the reference being the edges' source
    hits = {"ks": 0, "wasserstein": 0, "psi": 0, "js": 0}
    for _ in range(600):
        ref = reference(rng.normal(size=4_000))
        cur = window(rng.normal(size=4_000), ref)
        assert aligned_bins(ref, cur) is not None and not cur.is_exact
        for name, fn in (("ks", ks_test), ("wasserstein", wasserstein_test), ("psi", psi), ("js", js_test)):
            res = fn(ref, cur)
            assert res.status != Status.INCONCLUSIVE
            hits[name] += res.status == Status.DRIFT
    for name, h in hits.items():  # 95 % binomial range of 600 draws at 0.05: 19..42
        assert 0.025 <= h / 600 <= 0.075, (name, h / 600)


def test_trailing_windows_compared_on_the_same_edges_are_calibrated():
    """Two windows counted in a reference's edges (neither the source): pooled-quantile bins."""
    rng = np.random.default_rng(4)
    ref = reference(rng.gamma(2.0, size=50_000))
    hits = 0
    for _ in range(400):
        a, b = window(rng.gamma(2.0, size=3_000), ref), window(rng.gamma(2.0, size=5_000), ref)
        res = psi(a, b)
        assert res.error_bound == 0.0 and not a.bins.source
        hits += res.status == Status.DRIFT
    assert 0.02 <= hits / 400 <= 0.08


def test_bins_merge_like_one_pass_and_mismatched_edges_fall_back_to_the_digest():
    rng = np.random.default_rng(5)
    ref = reference(rng.normal(size=10_000))
    x = rng.normal(size=30_000)
    parts = [window(p, ref) for p in np.array_split(x, 3)]
    merged = NumericSketch()  # an empty sketch without bins is neutral in a merge
    for p in parts:
        merged.merge(p)
    assert merged.bins.counts.tolist() == window(x, ref).bins.counts.tolist()
    other = NumericSketch.binned(BinCounts(derive_edges(rng.normal(size=5_000))))
    other.update(rng.normal(size=5_000))
    assert aligned_bins(ref, other) is None
    r = ks_test(ref, other)
    assert r.error_bound > 0  # the digest path, with its data-dependent error bound
    mixed = window(x, ref)
    mixed.merge(other)  # different versions: no bins rather than misaligned ones
    assert mixed.bins is None


def test_window_profiles_count_in_the_templates_and_keep_the_version_through_bytes():
    rng = np.random.default_rng(6)
    edges = derive_edges(rng.normal(size=1_000))
    p = WindowProfile("m", 0, 300, bins={"x": BinCounts(edges)})
    n = 5_000
    p.add_columns(RecordColumns("m", ["1"] * n, [str(i) for i in range(n)], [0.0] * n,
                                {"x": rng.normal(size=n), "c": ["a"] * n}))
    q = WindowProfile.from_bytes(p.to_bytes())
    b = q.features["x"].numeric.bins
    assert b.version == BinCounts(edges).version and b.total == n and q.features["c"].numeric.bins is None
    assert q.edge_set().keys() == {"x"}


def test_small_windows_keep_their_values_so_ks_and_wasserstein_are_raw_data_tests():
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=MAX_EXACT_VALUES), rng.normal(0.1, 1, 700)
    sa, sb = NumericSketch(), NumericSketch()
    for part in np.array_split(a, 7):
        sa.update(part)
    sb.update(b)
    assert sa.is_exact and sb.is_exact and sa.rank_error == 0
    assert ks_test(sa, sb).statistic == pytest.approx(stats.ks_2samp(a, b).statistic, abs=1e-15)
    w = wasserstein_test(sa, sb)
    assert w.statistic == pytest.approx(stats.wasserstein_distance(a, b), rel=1e-12) and w.error_bound == 0
    sa.update(np.array([0.5]))  # one value more: the digest
    assert not sa.is_exact and sa.count == MAX_EXACT_VALUES + 1


async def test_a_window_restored_from_a_checkpoint_bins_features_first_seen_after_it(settings, store):
    """Real broker and Redis: an aggregator checkpoints an open window holding only x and
    stops; the next one restores it, then sees y for the first time. y counts in the
    reference's edges like x (the restored profile had lost its templates: y had no bins)."""
    from sdk import AsyncClient
    from service.profiles.keys import partition_key
    from service.profiles.reference import build_reference
    from tests.conftest import wait_for
    from tests.roles import running

    model, t0, rng = "restored", 1_700_000_100, np.random.default_rng(40)
    await store.put_reference(model, build_reference(
        model, [{"x": float(v), "y": float(w)} for v, w in rng.normal(size=(500, 2))]))
    keep_open = settings.model_copy(update={"idle_close_seconds": 3600.0})

    async def send(features: list[dict]) -> None:
        async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic, linger_ms=5) as client:
            for i, f in enumerate(features):
                client.log_prediction(model, f, prediction_id=f"{len(f)}-{i}", event_time=t0 + i * 0.01)
            await client.flush()

    async def checkpointed(n: int) -> bool:
        for p in range(settings.topic_partitions):
            for name, value in (await store.r.hgetall(partition_key(settings.predictions_topic, p))).items():
                if name.startswith(b"open:") and WindowProfile.from_bytes(value).count == n:
                    return True
        return False

    async with running(keep_open, store, "aggregator"):
        await send([{"x": float(v)} for v in rng.normal(size=300)])
        await wait_for(lambda: checkpointed(300), timeout=60)
    async with running(settings, store, "aggregator"):  # restores the window; closes it when idle
        await send([{"x": float(v), "y": float(w)} for v, w in rng.normal(size=(200, 2))])

        async def stored() -> bool:
            return bool(await store.window_members(model, 0, float("inf")))

        await wait_for(stored, timeout=60)
    members = await store.window_members(model, 0, float("inf"))
    (profile,) = await store.window_profiles(model, members)
    edges = await store.edge_sets([model])
    assert profile.count == 500
    x, y = profile.features["x"].numeric.bins, profile.features["y"].numeric.bins
    assert x is not None and x.total == 500 and x.version == BinCounts(edges[model]["x"]).version
    assert y is not None, "a feature first seen after the restore has no bins"
    assert y.total == 200 and y.version == BinCounts(edges[model]["y"]).version


def test_bin_counts_follow_searchsorted_left_with_values_on_the_edges_and_outside():
    rng = np.random.default_rng(11)
    edges = np.array([-1.0, 0.0, 0.5, 2.0])
    values = np.concatenate((rng.choice(edges, 300), rng.normal(scale=2.0, size=700)))
    rng.shuffle(values)
    counts = BinCounts(edges)
    counts.add(values)
    expected = np.bincount(np.searchsorted(edges, values, side="left"), minlength=edges.size + 1)
    assert counts.counts.tolist() == expected.tolist()
    assert counts.counts[0] > 0 and counts.counts[-1] > 0  # both outer bins are used
    counts.add(np.sort(values), is_sorted=True)
    assert counts.counts.tolist() == (2 * expected).tolist()
