"""Calibration of the tier-1 tests computed from profiles: false-positive rate under H0, and
power as a ratio to the same test on the raw data.

Under H0 the baseline and the current window are independent samples of one
distribution; every test runs through :func:`detectors.suite.evaluate_window`
on profiles with all floors 0 and alpha = 0.05. The baseline is built as the
service builds a reference: the continuous feature and the score count their
values in 100 quantile bins derived from the baseline's own values
(:mod:`sketches.bins`), which the current window counts in too (the binned
path; below ``MAX_EXACT_VALUES`` values both sides are kept exactly: the raw
path). ``unbinned`` is the same continuous feature without edges (the digest
fallback with its data-dependent error bound); ``discrete`` an integer-coded
feature (exact tables), ``categorical`` 8 categories, ``wide`` 2,000 Zipf
categories (sketches beyond 1,024). A calibrated test alarms in ~5 % of pairs.

Each test alone on many pairs (``by_test/...``, ``--test-reps``, 2,000 per n):
the tests of :data:`BY_TEST` (PSI, JS, KS, W1 and the mean shift of the
continuous feature, PSI, JS, KS, W1 of the score, every distribution test of
the discrete feature, chi2, PSI and JS of the categories and the predicted
label) on pairs of windows as above. At n <= 1,000 they are drawn as values;
beyond, as the statistics the tests read, with their exact laws
(:mod:`calibration_counts`: counts in the reference's edges, extremes,
moments, exact tables), in O(bins) per window instead of O(n), so that every
rate of the binned/exact path rests on 2,000 pairs (a true 0.05 then lies in
[0.03, 0.07] at 4.1 standard errors). The full windows keep 300 pairs at
n <= 1,000 down to 60 at 10^6: the tests that read the values (the digest
fallback ``unbinned``, the variance shift and extremes) stay on them.
Every rate is printed with its pairs and Clopper-Pearson 99 % interval.

Power (``power``): for a fixed set of alternatives at n = 1e3 ... 1e6 per side,
the share of pairs with status drift of each profile test, and of the same
test on the raw values of the same pairs: scipy's ``ks_2samp``, Welch's
``ttest_ind`` and ``chi2_contingency``; PSI, JS and Wasserstein with the same
statistic and null law computed on every raw value (sketches that keep all
values). ``power_ratio`` = profile / raw (1 when both are 0).

Multivariate tests (``multivariate``): the reconstruction-error and correlation
checks on co-moments (:mod:`detectors.multivariate`) under H0 for 5 correlated
Gaussian features of unequal means and scales (baseline and window of n rows
each, n = 100 ... 1e5), as ``fpr`` keys ``multivariate/<check>/<n>``, and for 5
independent heavy-tailed features (log-normal, Pareto, exponential, normal,
zero-inflated) as ``multivariate_heavy/<check>/<n>``; and the
power case: two N(0, 1) features whose correlation 0.8 in the baseline is 0 in
the window, 1,000 records per window, full profiles through
:func:`~detectors.suite.evaluate_window` (baseline with bins derived from its own
values, as a reference), with every univariate check's rate in the same pairs:
``power`` keys ``correlation_break/<feature>/<check>/1000`` (``profile``: share
of pairs with status drift, floors 0; ``default_floors``: with the service's
default floors).

Small-sample null law of PSI and JS (``--small-sample``): N_eff * PSI and
8 N_eff * JSD simulated under H0 on 10 equiprobable bins, for two multinomial
samples (categories, one bin per value) and for baseline-quantile bins (the
current's counts Dirichlet-multinomial given the baseline's), referred to the
plain chi2(9) and to :func:`detectors.stats.divergence_null.divergence_null`;
printed as rejection rate / alpha from 0.05 down to 1e-5. Then the power at
alpha = 1e-6 (the online FDR gate's scale) of PSI and JS on profiles,
N(0, 1) x 5,000 against N(0.5, 1) x 250, with both laws on the same pairs.

Usage::

    python benchmarks/calibration.py                 # n = 100 ... 1e6 (~8 CPU-minutes)
    python benchmarks/calibration.py --quick         # n = 100, 1000 (~1 CPU-minute)
    python benchmarks/calibration.py --sizes 1000000 --power-sizes ""   # one part of it
    python benchmarks/calibration.py --small-sample  # the PSI/JS null law and power (minutes)
    python benchmarks/calibration.py --vectors-only  # the vector tests (benchmarks/calibration_vectors.py)

The vector (embedding) tests run too (:mod:`calibration_vectors`: a 20-topic
mixture in 384 dimensions, n = 100 ... 1e5; ``--no-vectors`` skips them): their
rates join ``fpr`` as ``"embedding/check/n"`` and their power at 1,000
vectors per side is ``embedding_power`` (``"alternative/check/n"`` -> rate).

The last line printed is JSON: ``fpr`` (flat: ``"feature/check/n"`` -> rate;
``"by_test/feature/check/n"`` for the tests alone), ``fpr_pairs`` and
``fpr_ci99`` (the same keys: pairs, and the 99 % interval), ``fpr_max`` (per
feature/check), ``inconclusive_rate`` (flat, as ``fpr``),
``power`` (``"alternative/check/n"`` -> profile and raw rates),
``power_ratio`` (flat) and ``power_ratio_min`` (the multivariate part adds
``fpr`` / ``fpr_max`` keys ``multivariate/<check>`` and ``power`` keys
``correlation_break/...``; ``--no-multivariate`` skips it); with ``--small-sample``:
``small_sample`` (per case and check: simulated and predicted moments, rate /
alpha per level for each law) and ``power_at_1e-6``.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from collections import defaultdict

import calibration_counts as counts
import calibration_vectors
import numpy as np
from scipy import stats

from detectors.catalog import DEFAULT_FLOORS, MULTIVARIATE_CHECKS
from detectors.config import DetectorConfig
from detectors.drift.binned import aligned_bins
from detectors.drift.bins import aligned_masses, pool_sparse
from detectors.drift.chi2 import chi2_test
from detectors.drift.divergence import shrink
from detectors.drift.grid import joint_cdf
from detectors.drift.js import js_terms, js_test
from detectors.drift.ks import ks_test
from detectors.drift.mean_shift import mean_shift_test
from detectors.drift.psi import psi, psi_terms
from detectors.drift.variance_shift import variance_shift_test
from detectors.drift.wasserstein import wasserstein_test
from detectors.result import Status
from detectors.stats.divergence_null import JS_QUARTIC, PSI_QUARTIC, divergence_null
from detectors.stats.interval import chi2_interval_p
from detectors.suite import evaluate_window
from sdk.columns import RecordColumns
from sketches.bins import BinCounts, derive_edges
from sketches.categorical import CategoricalSketch
from sketches.comoments import CoMoments
from sketches.numeric import MAX_EXACT_VALUES, NumericSketch
from sketches.profile import FeatureProfile, WindowProfile

ALPHA = 0.05
SHIFT = 0.05
WIDE_CATEGORIES = 2_000
CATEGORY_P = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
NULL_P = 0.1
SPLIT = 0.5
"""Bimodal split: the current is +/-0.5 sd mixed half and half, each with sd sqrt(1 - 0.25)."""
NEW_SHARE = 0.02
CONFIG = DetectorConfig(alpha=ALPHA, floors=dict.fromkeys(DEFAULT_FLOORS, 0.0))
KS_CRIT = 1.358  # sqrt(N_eff) D at alpha = 0.05 (Kolmogorov distribution)


RAW_ALTERNATIVES = ("mean_shift", "scale", "vanished_decile", "bimodal_split")
CATEGORY_ALTERNATIVES = ("category_swap", "new_category")
NUMERIC_TESTS = (("ks", ks_test), ("psi", psi), ("js", js_test), ("wasserstein", wasserstein_test),
                 ("mean_shift", mean_shift_test))
CATEGORY_TESTS = (("chi2", chi2_test), ("psi", psi), ("js", js_test))


def _numeric(values: np.ndarray, nulls: int = 0, bins: BinCounts | None = None) -> FeatureProfile:
    f = _feature(NumericSketch.binned(bins))
    f.numeric.update(values)
    f.missing = nulls
    return f


def _feature(sketch: NumericSketch) -> FeatureProfile:
    f = FeatureProfile()
    f.numeric = sketch
    return f


def _categorical(counts: np.ndarray, nulls: int = 0) -> FeatureProfile:
    f = FeatureProfile()
    f.categorical.update_counts({f"c{i}": int(c) for i, c in enumerate(counts) if c})
    f.missing = nulls
    return f


def _bins(values: np.ndarray, edges: dict[str, BinCounts] | None, name: str) -> BinCounts:
    """The baseline's bins (derived from its own values, as at reference upload) or the
    current's (counted in the baseline's edges)."""
    if edges is None:
        return BinCounts(derive_edges(values), source=True)
    return edges[name].empty_like()


def window(n: int, rng: np.random.Generator,
           edges: dict[str, BinCounts] | None = None) -> tuple[WindowProfile, dict[str, BinCounts]]:
    """One H0 window of ``n`` records; ``edges`` None: a baseline, whose bins are returned."""
    p = WindowProfile("calibration", 0, 300)
    p.count = n
    nulls = int(rng.binomial(n, NULL_P))
    cont = rng.normal(0.0, 1.0, n - nulls)
    zipf, beyond = counts.zipf_counts(n, rng, 1.3, WIDE_CATEGORIES)
    score = rng.beta(2.0, 5.0, n)
    bins = {"continuous": _bins(cont, edges, "continuous"), "score": _bins(score, edges, "score")}
    continuous = _numeric(cont, nulls, bins["continuous"])
    unbinned = FeatureProfile()  # the same values without edges: shares the digest
    unbinned.numeric, unbinned.missing = copy.copy(continuous.numeric), nulls
    unbinned.numeric.bins = None
    p.features = {
        "continuous": continuous,
        "unbinned": unbinned,
        "discrete": _feature(counts.discrete(n, rng)),
        "categorical": _categorical(rng.multinomial(n, CATEGORY_P)),
        "wide": _categorical(np.concatenate(([0], zipf)), beyond),
    }
    p.score = NumericSketch.binned(bins["score"])
    p.score.update(score)
    labels = rng.binomial(n, 0.3)
    p.prediction.update_counts({"true": int(labels), "false": int(n - labels)})
    return p, bins


def fpr(n_ref: int, n_cur: int, reps: int, seed: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per "feature/check": the share of H0 pairs with status drift, and of inconclusive."""
    rng = np.random.default_rng(seed)
    drift: dict[str, int] = defaultdict(int)
    inconclusive: dict[str, int] = defaultdict(int)
    seen: set[str] = set()
    for _ in range(reps):
        base, edges = window(n_ref, rng)
        cur, _ = window(n_cur, rng, edges)
        table = np.vstack([[w.features["categorical"].categorical.exact.get(f"c{i}", 0)
                            for i in range(CATEGORY_P.size)] for w in (base, cur)])
        p = stats.chi2_contingency(table[:, table.sum(axis=0) > 0], correction=False).pvalue
        seen.add("categorical/chi2_raw_scipy")
        drift["categorical/chi2_raw_scipy"] += p < ALPHA
        for r in evaluate_window(cur, base, CONFIG):
            key = f"{r.feature or 'window'}/{r.check}"
            if r.status in (Status.INSUFFICIENT_DATA, Status.ERROR):
                continue
            seen.add(key)
            drift[key] += r.status == Status.DRIFT
            inconclusive[key] += r.status == Status.INCONCLUSIVE
    return ({k: drift[k] / reps for k in sorted(seen)}, {k: inconclusive[k] / reps for k in sorted(seen)})


BY_TEST: dict[str, tuple[str, ...]] = {
    "continuous": ("ks", "psi", "js", "wasserstein", "mean_shift"),
    "score": ("ks", "psi", "js", "wasserstein"),
    "discrete": ("ks", "psi", "js", "wasserstein", "mean_shift", "variance_shift"),
    "categorical": ("chi2", "psi", "js"),
    "__prediction__": ("chi2", "psi", "js"),
}
"""The tests measured one by one on many pairs (:func:`test_fpr`): each reads only statistics
:mod:`calibration_counts` draws with their exact law (the variance shift on the continuous
feature and the score also reads the CDF grid with the moments: full windows only)."""
TESTS = {"ks": ks_test, "psi": psi, "js": js_test, "wasserstein": wasserstein_test,
         "mean_shift": mean_shift_test, "variance_shift": variance_shift_test, "chi2": chi2_test}
TEST_REPS = 2_000
"""H0 pairs per n of :func:`test_fpr`: a true 0.05 lies within [0.03, 0.07] at > 4 standard errors."""


def _sketches(p: WindowProfile) -> dict[str, NumericSketch | CategoricalSketch]:
    """The sketches of a full window that :data:`BY_TEST` reads."""
    return {"continuous": p.features["continuous"].numeric, "score": p.score,
            "discrete": p.features["discrete"].numeric,
            "categorical": p.features["categorical"].categorical, "__prediction__": p.prediction}


def counted_window(n: int, rng: np.random.Generator,
                   ref: dict[str, NumericSketch | CategoricalSketch] | None = None,
                   ) -> dict[str, NumericSketch | CategoricalSketch]:
    """One H0 window of ``n`` records as :func:`window` draws it, built from the statistics the
    tests read, drawn directly (:mod:`calibration_counts`); ``ref`` None: a baseline."""
    finite = n - int(rng.binomial(n, NULL_P))
    if ref is None:
        cont, score = counts.reference(counts.NORMAL, finite, rng), counts.reference(counts.SCORE, n, rng)
    else:
        cont = counts.current(counts.NORMAL, finite, ref["continuous"], rng)
        score = counts.current(counts.SCORE, n, ref["score"], rng)
    labels = int(rng.binomial(n, 0.3))
    prediction = CategoricalSketch()
    prediction.update_counts({"true": labels, "false": n - labels})
    return {"continuous": cont, "score": score, "discrete": counts.discrete(n, rng),
            "categorical": _categorical(rng.multinomial(n, CATEGORY_P)).categorical,
            "__prediction__": prediction}


def direct_draws(n: int) -> bool:
    """True when both sides of an n-record pair are past ``MAX_EXACT_VALUES`` (digest mode, binned
    tests): the windows are then drawn as counts (:func:`counted_window`), else as values."""
    return n * (1 - NULL_P) > 2 * MAX_EXACT_VALUES


def test_fpr(n: int, reps: int, seed: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per "feature/check" of :data:`BY_TEST`: the share of ``reps`` H0 pairs of ``n`` records
    with status drift, and of inconclusive; with scipy's chi2 on the categorical counts."""
    rng = np.random.default_rng(seed)
    drift: dict[str, int] = defaultdict(int)
    inconclusive: dict[str, int] = defaultdict(int)
    seen: set[str] = set()
    for _ in range(reps):
        if direct_draws(n):
            base = counted_window(n, rng)
            cur = counted_window(n, rng, base)
        else:
            ref, edges = window(n, rng)
            base, cur = _sketches(ref), _sketches(window(n, rng, edges)[0])
        table = np.vstack([[w["categorical"].exact.get(f"c{i}", 0) for i in range(CATEGORY_P.size)]
                           for w in (base, cur)])
        p = stats.chi2_contingency(table[:, table.sum(axis=0) > 0], correction=False).pvalue
        seen.add("categorical/chi2_raw_scipy")
        drift["categorical/chi2_raw_scipy"] += p < ALPHA
        for feature, checks in BY_TEST.items():
            for check in checks:
                r = TESTS[check](base[feature], cur[feature], alpha=ALPHA)
                if r.status in (Status.INSUFFICIENT_DATA, Status.ERROR):
                    continue
                key = f"{feature}/{check}"
                seen.add(key)
                drift[key] += r.status == Status.DRIFT
                inconclusive[key] += r.status == Status.INCONCLUSIVE
    return ({k: drift[k] / reps for k in sorted(seen)}, {k: inconclusive[k] / reps for k in sorted(seen)})


def interval99(rate: float, pairs: int) -> tuple[float, float]:
    """Clopper-Pearson 99 % interval of a rate observed over ``pairs`` pairs."""
    ci = stats.binomtest(round(rate * pairs), pairs).proportion_ci(0.99)
    return round(float(ci.low), 4), round(float(ci.high), 4)


def print_cells(label: str, pairs: int, rates: dict[str, float], inconclusive: dict[str, float]) -> None:
    """One line per feature: each check's rate, its 99 % interval and inconclusive share."""
    by_feature: dict[str, list[str]] = defaultdict(list)
    for key, rate in rates.items():
        feature, check = key.rsplit("/", 1)
        lo, hi = interval99(rate, pairs)
        inc = inconclusive.get(key, 0.0)
        cell = f"{check}={rate:.3f} [{lo:.3f},{hi:.3f}]"
        by_feature[feature].append(cell + (f" inc={inc:.3f}" if inc else ""))
    for feature, cells in by_feature.items():
        print(f"n={label:>12} pairs={pairs:>5} {feature:>24}: " + " ".join(cells), flush=True)


def alternative(name: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Baseline and current raw values of ``n`` per side under one alternative (numeric:
    float64 values; categorical: int64 category indices)."""
    if name == "mean_shift":  # 0.05 sd
        return rng.normal(0, 1, n), rng.normal(SHIFT, 1, n)
    if name == "scale":  # sd x 1.1
        return rng.normal(0, 1, n), rng.normal(0, 1.1, n)
    if name == "vanished_decile":  # U(0, 1) against U(0, 0.9), 0.9 n values
        return rng.uniform(0, 1, n), rng.uniform(0, 0.9, int(0.9 * n))
    if name == "bimodal_split":  # one mode split in two, same mean and variance
        half = rng.integers(0, 2, n) * 2 - 1
        return rng.normal(0, 1, n), half * SPLIT + rng.normal(0, math.sqrt(1 - SPLIT**2), n)
    k = CATEGORY_P.size
    if name == "category_swap":  # two categories' shares swapped (0.10 <-> 0.08)
        q = CATEGORY_P.copy()
        q[[4, 5]] = q[[5, 4]]
        return rng.choice(k, n, p=CATEGORY_P), rng.choice(k, n, p=q)
    if name == "new_category":  # a category of 2 % never seen in the baseline
        q = np.append(CATEGORY_P * (1 - NEW_SHARE), NEW_SHARE)
        return rng.choice(k, n, p=CATEGORY_P), rng.choice(k + 1, n, p=q)
    raise ValueError(name)


def _sketch(values: np.ndarray, bins: BinCounts | None = None, batch: int = 1_000) -> NumericSketch:
    """A window's sketch, built from batches as the aggregator does."""
    s = NumericSketch.binned(bins)
    for part in np.array_split(values, max(1, values.size // batch)):
        s.update(part)
    return s


def _counts(indices: np.ndarray) -> CategoricalSketch:
    s = CategoricalSketch()
    counts = np.bincount(indices)
    s.update_counts({f"c{i}": int(c) for i, c in enumerate(counts) if c})
    return s


def raw_decisions(name: str, a: np.ndarray, b: np.ndarray) -> dict[str, bool]:
    """Drift at ALPHA of each test on the raw values (scipy, or the same statistic and law on
    sketches keeping every value)."""
    if name in CATEGORY_ALTERNATIVES:
        ca, cb = _counts(a), _counts(b)
        k = max(a.max(), b.max()) + 1
        table = np.vstack([np.bincount(a, minlength=k), np.bincount(b, minlength=k)])
        table = table[:, table.sum(axis=0) > 0]
        return {"chi2": bool(stats.chi2_contingency(table, correction=False).pvalue < ALPHA),
                "psi": psi(ca, cb).status == Status.DRIFT, "js": js_test(ca, cb).status == Status.DRIFT}
    ra, rb = NumericSketch.of_values(a), NumericSketch.of_values(b)
    return {"ks": bool(stats.ks_2samp(a, b).pvalue < ALPHA),
            "psi": psi(ra, rb).status == Status.DRIFT, "js": js_test(ra, rb).status == Status.DRIFT,
            "wasserstein": wasserstein_test(ra, rb).status == Status.DRIFT,
            "mean_shift": bool(stats.ttest_ind(a, b, equal_var=False).pvalue < ALPHA)}


def profile_decisions(name: str, a: np.ndarray, b: np.ndarray) -> dict[str, Status]:
    """Status of each test on profiles: the baseline counted in the bins derived from its own
    values (a reference), the current in the same edges."""
    if name in CATEGORY_ALTERNATIVES:
        ca, cb = _counts(a), _counts(b)
        return {check: fn(ca, cb).status for check, fn in CATEGORY_TESTS}
    bins = BinCounts(derive_edges(a), source=True)
    sa, sb = _sketch(a, bins), _sketch(b, bins.empty_like())
    binned = aligned_bins(sa, sb) is not None and not (sa.is_exact and sb.is_exact)
    grid = None if binned else joint_cdf(sa, sb)
    out = {}
    for check, fn in NUMERIC_TESTS:
        kwargs = {"grid": grid} if check != "mean_shift" and grid is not None else {}
        out[check] = fn(sa, sb, **kwargs).status
    return out


def power(n: int, reps: int, seed: int) -> dict[str, dict[str, float]]:
    """Per "alternative/check": the profile test's and the raw-data test's share of drift."""
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, float]] = {}
    for name in RAW_ALTERNATIVES + CATEGORY_ALTERNATIVES:
        hits: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for _ in range(reps):
            a, b = alternative(name, n, rng)
            prof, raw = profile_decisions(name, a, b), raw_decisions(name, a, b)
            for check, status in prof.items():
                hits[check][0] += status == Status.DRIFT
                hits[check][1] += raw[check]
                hits[check][2] += status == Status.INCONCLUSIVE
        for check, (p, r, inc) in hits.items():
            out[f"{name}/{check}"] = {"profile": p / reps, "raw": r / reps, "inconclusive": inc / reps}
    return out


def power_ratio(row: dict[str, float]) -> float:
    """Profile power / raw power (1 when both are 0)."""
    if row["raw"] == 0:
        return 1.0 if row["profile"] == 0 else math.inf
    return row["profile"] / row["raw"]


MV_CORR = np.array([[1.0, 0.6, 0.3, 0.0, 0.0], [0.6, 1.0, 0.4, 0.0, 0.0], [0.3, 0.4, 1.0, 0.2, 0.0],
                    [0.0, 0.0, 0.2, 1.0, 0.5], [0.0, 0.0, 0.0, 0.5, 1.0]])
"""H0 correlation of the multivariate calibration (eigenvalues 0.38 ... 1.90: two components
keep 68 % of the variance)."""
MV_MEAN = np.array([0.0, 10.0, -3.0, 1e3, 0.5])
MV_SCALE = np.array([1.0, 0.1, 5.0, 200.0, 1.0])
CORR_BREAK = 0.8
MV_DEFAULTS = DetectorConfig(alpha=ALPHA)


def _block(x: np.ndarray) -> CoMoments:
    c = CoMoments()
    c.update({f"f{j}": x[:, j] for j in range(x.shape[1])}, {}, len(x))
    return c


def _heavy_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    """Independent heavy-tailed features: log-normal(0, 1), Pareto (Lomax) of shape 3,
    exponential, N(0, 1), and a 70 %-zero log-normal."""
    zero = rng.uniform(size=n) < 0.7
    return np.column_stack([rng.lognormal(0, 1, n), rng.pareto(3.0, n), rng.exponential(size=n),
                            rng.normal(size=n), np.where(zero, 0.0, rng.lognormal(0, 1, n))])


def multivariate_fpr(n: int, reps: int, seed: int, heavy: bool = False) -> dict[str, float]:
    """H0 rate of each multivariate check, floor 0, alpha 0.05: baseline and window of ``n``
    rows each from one 5-feature Gaussian (:data:`MV_CORR`, :data:`MV_MEAN`, :data:`MV_SCALE`),
    or with ``heavy`` from independent heavy-tailed features (:func:`_heavy_rows`)."""
    rng = np.random.default_rng(seed)
    chol = np.linalg.cholesky(MV_CORR) * MV_SCALE[:, None]
    hits: dict[str, int] = defaultdict(int)
    for _ in range(reps):
        ref, cur = (_block(_heavy_rows(rng, n) if heavy else MV_MEAN + rng.normal(size=(n, 5)) @ chol.T)
                    for _ in range(2))
        for check, fn in MULTIVARIATE_CHECKS.items():
            hits[check] += fn(ref, cur).status == Status.DRIFT
    name = "multivariate_heavy" if heavy else "multivariate"
    return {f"{name}/{check}/{n}": hits[check] / reps for check in MULTIVARIATE_CHECKS}


def _profile(x: np.ndarray, bins: dict[str, BinCounts], start: int) -> WindowProfile:
    n = len(x)
    p = WindowProfile("calibration", start, 300 if start else 0, bins=bins)
    p.add_columns(RecordColumns("calibration", ["1"] * n, [""] * n, [0.0] * n,
                                {"a": x[:, 0], "b": x[:, 1]}))
    return p


def correlation_break(n: int, reps: int, seed: int) -> dict[str, dict[str, float]]:
    """Per "feature/check": share of pairs with status drift when the baseline's correlation
    :data:`CORR_BREAK` between two N(0, 1) features is 0 in the window (marginals unchanged),
    with floors 0 (``profile``) and with the default floors (``default_floors``)."""
    rng = np.random.default_rng(seed)
    cov = np.array([[1.0, CORR_BREAK], [CORR_BREAK, 1.0]])
    hits: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for _ in range(reps):
        x = rng.multivariate_normal([0.0, 0.0], cov, size=n)
        bins = {k: BinCounts(derive_edges(x[:, j]), source=True) for j, k in enumerate("ab")}
        base = _profile(x, bins, 0)
        cur = _profile(rng.normal(size=(n, 2)), {k: b.empty_like() for k, b in bins.items()}, 300)
        for i, cfg in enumerate((CONFIG, MV_DEFAULTS)):
            for r in evaluate_window(cur, base, cfg):
                if r.feature in ("a", "b", "__multivariate__"):
                    hits[f"{r.feature}/{r.check}"][i] += r.status == Status.DRIFT
    return {f"correlation_break/{k}/{n}": {"profile": h[0] / reps, "default_floors": h[1] / reps}
            for k, h in sorted(hits.items())}


LEVELS = (0.05, 0.01, 1e-3, 1e-4, 1e-5)
#: (baseline-quantile bins?, n_ref, n_cur)
SMALL_SAMPLE_CASES = ((True, 100, 100), (True, 300, 300), (True, 5000, 250), (True, 5000, 100),
                      (False, 100, 100), (False, 300, 300), (False, 5000, 250))
CHECKS = (("psi", PSI_QUARTIC, psi_terms), ("js", JS_QUARTIC, js_terms))


def null_statistics(quantile_bins: bool, n_ref: int, n_cur: int, reps: int,
                    rng: np.random.Generator) -> dict[str, np.ndarray]:
    """N_eff * PSI and 8 N_eff * JSD of ``reps`` H0 pairs over 10 equiprobable bins."""
    p = np.full(10, 0.1)
    if quantile_bins:  # counts between baseline quantiles: every interleaving equally likely
        alpha = np.full(10, n_ref / 10)
        alpha[-1] += 1  # n_ref + 1 gaps between (and around) the baseline's order statistics
        cur = rng.multinomial(n_cur, rng.dirichlet(alpha, size=reps)) / n_cur
        ref = np.broadcast_to(p, cur.shape)
    else:
        cur = rng.multinomial(n_cur, p, size=reps) / n_cur
        ref = rng.multinomial(n_ref, p, size=reps) / n_ref
    n_eff = n_ref * n_cur / (n_ref + n_cur)
    return {name: n_eff * terms(ref, cur, n_ref, n_cur).sum(axis=1) for name, _q, terms in CHECKS}


def small_sample_levels(reps: int, seed: int) -> dict[str, dict]:
    """Per case and check: moments, and rejection rate / alpha under chi2(9) and the small-sample law."""
    rng = np.random.default_rng(seed)
    out: dict[str, dict] = {}
    chunk = 200_000
    for quantile_bins, n_ref, n_cur in SMALL_SAMPLE_CASES:
        case = f"{'quantile' if quantile_bins else 'multinomial'} {n_ref}x{n_cur}"
        laws = {name: divergence_null(np.full(10, 0.1), n_ref, n_cur, q,
                                      reference_quantiles=quantile_bins, terms=terms)
                for name, q, terms in CHECKS}
        hits = {name: {law: np.zeros(len(LEVELS)) for law in ("chi2", "small_sample")} for name in laws}
        sums = {name: np.zeros(2) for name in laws}
        done = 0
        while done < reps:
            stats_ = null_statistics(quantile_bins, n_ref, n_cur, min(chunk, reps - done), rng)
            for name, t in stats_.items():
                law = laws[name]
                sums[name] += (t.sum(), (t * t).sum())
                for key, p in (("chi2", stats.chi2.sf(t, 9)),
                               ("small_sample", stats.chi2.sf(t / law.scale, law.df))):
                    hits[name][key] += [np.sum(p < a) for a in LEVELS]
            done += min(chunk, reps - done)
        out[case] = {}
        for name, law in laws.items():
            mean = sums[name][0] / reps
            ratios = {key: {f"{a:g}": round(float(h / reps / a), 2)
                            for a, h in zip(LEVELS, hits[name][key], strict=True)}
                      for key in ("chi2", "small_sample")}
            out[case][name] = {
                "simulated_mean": round(float(mean), 3), "law_mean": round(law.mean, 3),
                "simulated_var": round(float(sums[name][1] / reps - mean**2), 3),
                "law_var": round(law.variance, 3),
                **ratios,
            }
            row = out[case][name]
            print(f"{case:>22} {name:>3}: rate/alpha chi2 {row['chi2']} small-sample {row['small_sample']}",
                  flush=True)
    return out


def power_small_window(reps: int, seed: int, alpha: float = 1e-6, shift: float = 0.5) -> dict[str, float]:
    """Share of pairs N(0,1) x 5,000 vs N(shift,1) x 250 with p < alpha, floor 0: small-sample law
    (the detectors) and the plain chi2(B - 1) on the same (sketch-error-shrunk) statistic."""
    rng = np.random.default_rng(seed)
    hits: dict[str, int] = defaultdict(int)
    for _ in range(reps):
        a, b = NumericSketch(), NumericSketch()
        a.update(rng.normal(size=5000))
        b.update(rng.normal(shift, 1.0, 250))
        g = joint_cdf(a, b)
        r, c, eta = aligned_masses(a, b, 10, g)
        keep = (r > 0) | (c > 0)
        r, c = pool_sparse(r[keep], c[keep], min(a.count, b.count))
        n_eff = a.count * b.count / (a.count + b.count)
        c = shrink(r, c, eta)
        for name, test, terms in (("psi", psi, psi_terms), ("js", js_test, js_terms)):
            plain = chi2_interval_p(n_eff * float(terms(r, c, a.count, b.count).sum()), r.size - 1)
            hits[f"{name}_chi2"] += plain < alpha
            hits[f"{name}_small_sample"] += test(a, b, grid=g).p_value < alpha
    return {k: v / reps for k, v in sorted(hits.items())}


def reps_for(n: int, budget: int) -> int:
    """H0 pairs at window size n: ``budget`` at small n, fewer as n grows (100 at 1e5, 60 at 1e6)."""
    return int(max(60 if n >= 1_000_000 else 100, min(budget, budget * 3_000 // max(n, 1))))


POWER_REPS = {1_000: 200, 10_000: 100, 100_000: 30, 1_000_000: 8}
MV_SIZES = (100, 1_000, 10_000, 100_000)
MV_REPS = {100: 2_000, 1_000: 2_000, 10_000: 1_000, 100_000: 300}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="n = 100 and 1000 only")
    ap.add_argument("--reps", type=int, default=300, help="H0 pairs at small n")
    ap.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], default=None,
                    help="comma-separated n of the H0 part (default 100 ... 1e6 and 50k x 561k)")
    ap.add_argument("--power-sizes", type=lambda v: [int(x) for x in v.split(",") if x], default=None,
                    help="comma-separated n of the power part (default 1e3 ... 1e6; empty: none)")
    ap.add_argument("--test-reps", type=int, default=TEST_REPS,
                    help="H0 pairs per n of the tests measured one by one (by_test/...)")
    ap.add_argument("--seed", type=int, default=20240605)
    ap.add_argument("--small-sample", action="store_true",
                    help="only the PSI/JS small-sample null law and the power at alpha 1e-6")
    ap.add_argument("--small-sample-reps", type=int, default=2_000_000,
                    help="simulated H0 statistics per case (--small-sample)")
    ap.add_argument("--power-reps", type=int, default=1000, help="pairs for the power at 1e-6")
    ap.add_argument("--no-multivariate", action="store_true", help="skip the multivariate part")
    ap.add_argument("--no-vectors", action="store_true", help="skip the vector tests")
    ap.add_argument("--vectors-only", action="store_true", help="only the vector tests")
    args = ap.parse_args()
    if args.small_sample:
        t0 = time.perf_counter()
        out = {"small_sample": small_sample_levels(args.small_sample_reps, args.seed)}
        out["power_at_1e-6"] = power_small_window(args.power_reps, args.seed)
        print("power at 1e-6, N(0,1) x 5000 vs N(0.5,1) x 250: "
              + " ".join(f"{k}={v:.3f}" for k, v in out["power_at_1e-6"].items()), flush=True)
        out["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(out))
        return
    sizes = args.sizes or ([100, 1000] if args.quick else [100, 1000, 10_000, 100_000, 1_000_000])
    t0 = time.perf_counter()
    out: dict[str, dict] = {"fpr": {}, "fpr_pairs": {}, "inconclusive_rate": {}, "reps": {}}
    cases = [] if args.vectors_only else [(n, n, reps_for(n, args.reps), str(n)) for n in sizes]
    if args.sizes is None and not args.vectors_only:
        cases.append((50_000, 561_000, 20 if args.quick else 40, "50000x561000"))
    for n_ref, n_cur, reps, label in cases:
        f, inc = fpr(n_ref, n_cur, reps, args.seed + n_cur)
        out["reps"][label] = reps
        for k, v in f.items():
            out["fpr"][f"{k}/{label}"], out["fpr_pairs"][f"{k}/{label}"] = v, reps
        out["inconclusive_rate"].update({f"{k}/{label}": v for k, v in inc.items()})
        print_cells(label, reps, f, inc)
    for n in [] if args.vectors_only else sizes:
        f, inc = test_fpr(n, args.test_reps, args.seed + 5 * n)
        out["reps"][f"by_test/{n}"] = args.test_reps
        for k, v in f.items():
            out["fpr"][f"by_test/{k}/{n}"], out["fpr_pairs"][f"by_test/{k}/{n}"] = v, args.test_reps
        out["inconclusive_rate"].update({f"by_test/{k}/{n}": v for k, v in inc.items()})
        print_cells(f"by_test {n}", args.test_reps, f, inc)
    if not args.no_vectors:
        v = calibration_vectors.run([n for n in sizes if n <= 100_000], power_reps=50 if args.quick else 200,
                                    reps_scale=0.25 if args.quick else 1.0)
        out["fpr"].update(v["fpr"])
        out["fpr_pairs"].update({k: 2_000 if "/norm_shift_many/" in k else v["reps"][k.rsplit("/", 1)[1]]
                                 for k in v["fpr"]})
        out["reps"].update({f"embedding/{k}": r for k, r in v["reps"].items()})
        out["embedding_power"] = v["power"]
    checks = sorted({k.rsplit("/", 1)[0] for k in out["fpr"]})
    out["fpr_max"] = {c: max(v for k, v in out["fpr"].items() if k.rsplit("/", 1)[0] == c) for c in checks}
    out["power"], out["power_ratio"] = {}, {}
    power_sizes = [] if args.vectors_only else args.power_sizes if args.power_sizes is not None else (
        [1000] if args.quick else sorted(POWER_REPS))
    for n in power_sizes:
        for key, row in power(n, POWER_REPS.get(n, 50), args.seed + 7 * n).items():
            out["power"][f"{key}/{n}"] = row
            out["power_ratio"][f"{key}/{n}"] = round(power_ratio(row), 3)
        print(f"power n={n}: " + " ".join(
            f"{k.rsplit('/', 1)[0]}={v['profile']:.2f}/{v['raw']:.2f}"
            for k, v in out["power"].items() if k.endswith(f"/{n}")), flush=True)
    out["power_ratio_min"] = min(out["power_ratio"].values(), default=None)
    if not args.no_multivariate and not args.vectors_only:
        for heavy in (False, True):
            for n in [100, 1000] if args.quick else MV_SIZES:
                reps = MV_REPS.get(n, 200) // (4 if heavy else 1)
                f = multivariate_fpr(n, reps, args.seed + 11 * n + heavy, heavy)
                out["fpr"].update(f)
                out["fpr_pairs"].update(dict.fromkeys(f, reps))
                print(f"n={n}: " + " ".join(f"{k}={v:.3f}" for k, v in f.items()), flush=True)
        for name in ("multivariate", "multivariate_heavy"):
            for check in MULTIVARIATE_CHECKS:
                out["fpr_max"][f"{name}/{check}"] = max(
                    v for k, v in out["fpr"].items() if k.startswith(f"{name}/{check}/"))
        brk = correlation_break(1_000, 100 if args.quick else 300, args.seed + 13)
        out["power"].update(brk)
        print("correlation 0.8 -> 0, n=1000: " + " ".join(
            f"{k.split('/', 1)[1].rsplit('/', 1)[0]}={v['profile']:.2f}/{v['default_floors']:.2f}"
            for k, v in brk.items()), flush=True)
    out["fpr_ci99"] = {k: interval99(v, out["fpr_pairs"][k]) for k, v in out["fpr"].items()}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
