"""Calibration of the tier-1 tests computed from profiles: false-positive rate under H0 and power.

Under H0 the baseline and the current window are independent samples of one
distribution; every test runs through :func:`detectors.suite.evaluate_window`
on profiles (t-digest for the continuous feature, exact counts for the
discrete and categorical ones, sketches for the high-cardinality one) with
all floors 0 and alpha = 0.05. A calibrated test alarms in ~5 % of pairs.

Power: a small fixed shift (0.05 sd) of the continuous feature, KS and PSI on
profiles against scipy's KS on the raw values of the same samples.

Small-sample null law of PSI and JS (``--small-sample``): N_eff * PSI and
8 N_eff * JSD simulated under H0 on 10 equiprobable bins, for two multinomial
samples (categories, one bin per value) and for baseline-quantile bins (the
current's counts Dirichlet-multinomial given the baseline's), referred to the
plain chi2(9) and to :func:`detectors.stats.divergence_null.divergence_null`;
printed as rejection rate / alpha from 0.05 down to 1e-5. Then the power at
alpha = 1e-6 (the online FDR gate's scale) of PSI and JS on profiles,
N(0, 1) x 5,000 against N(0.5, 1) x 250, with both laws on the same pairs.

Usage::

    python benchmarks/calibration.py                 # n = 100 ... 1e6
    python benchmarks/calibration.py --quick         # n = 100, 1000 (seconds)
    python benchmarks/calibration.py --small-sample  # the PSI/JS null law and power (minutes)

The last line printed is JSON: ``fpr`` (per test and n), ``fpr_max`` (per
test), ``power`` and ``sketch_dominates_n``; with ``--small-sample``:
``small_sample`` (per case and check: simulated and predicted moments, rate /
alpha per level for each law) and ``power_at_1e-6``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import defaultdict

import numpy as np
from scipy import stats

from detectors.catalog import DEFAULT_FLOORS
from detectors.config import DetectorConfig
from detectors.drift.bins import aligned_masses, pool_sparse
from detectors.drift.divergence import shrink
from detectors.drift.grid import joint_cdf
from detectors.drift.js import js_terms, js_test
from detectors.drift.psi import psi, psi_terms
from detectors.result import Status
from detectors.stats.divergence_null import JS_QUARTIC, PSI_QUARTIC, divergence_null
from detectors.stats.interval import chi2_interval_p
from detectors.suite import evaluate_window
from sketches.numeric import TDIGEST_RANK_ERROR, NumericSketch
from sketches.profile import FeatureProfile, WindowProfile

ALPHA = 0.05
SHIFT = 0.05
WIDE_CATEGORIES = 2_000
CATEGORY_P = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
NULL_P = 0.1
CONFIG = DetectorConfig(alpha=ALPHA, floors=dict.fromkeys(DEFAULT_FLOORS, 0.0))
KS_CRIT = 1.358  # sqrt(N_eff) D at alpha = 0.05 (Kolmogorov distribution)


def _numeric(values: np.ndarray, nulls: int = 0) -> FeatureProfile:
    f = FeatureProfile()
    f.numeric.update(values)
    f.missing = nulls
    return f


def _categorical(counts: np.ndarray, nulls: int = 0) -> FeatureProfile:
    f = FeatureProfile()
    f.categorical.update_counts({f"c{i}": int(c) for i, c in enumerate(counts) if c})
    f.missing = nulls
    return f


def window(n: int, rng: np.random.Generator, shift: float = 0.0) -> tuple[WindowProfile, np.ndarray]:
    """One window of ``n`` records; returns it and the continuous feature's raw values."""
    p = WindowProfile("calibration", 0, 300)
    p.count = n
    nulls = int(rng.binomial(n, NULL_P))
    cont = rng.normal(shift, 1.0, n - nulls)
    zipf = rng.zipf(1.3, n)
    p.features = {
        "continuous": _numeric(cont, nulls),
        "discrete": _numeric(rng.poisson(4.0, n).astype(np.float64)),
        "categorical": _categorical(rng.multinomial(n, CATEGORY_P)),
        "wide": _categorical(np.bincount(zipf[zipf <= WIDE_CATEGORIES], minlength=WIDE_CATEGORIES),
                             int((zipf > WIDE_CATEGORIES).sum())),
    }
    p.score.update(rng.beta(2.0, 5.0, n))
    labels = rng.binomial(n, 0.3)
    p.prediction.update_counts({"true": int(labels), "false": int(n - labels)})
    return p, cont


def fpr(n_ref: int, n_cur: int, reps: int, seed: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per "feature/check": the share of H0 pairs with status drift, and of inconclusive."""
    rng = np.random.default_rng(seed)
    drift: dict[str, int] = defaultdict(int)
    inconclusive: dict[str, int] = defaultdict(int)
    seen: set[str] = set()
    for _ in range(reps):
        base, _ = window(n_ref, rng)
        cur, _ = window(n_cur, rng)
        for r in evaluate_window(cur, base, CONFIG):
            key = f"{r.feature or 'window'}/{r.check}"
            if r.status in (Status.INSUFFICIENT_DATA, Status.ERROR):
                continue
            seen.add(key)
            drift[key] += r.status == Status.DRIFT
            inconclusive[key] += r.status == Status.INCONCLUSIVE
    return ({k: drift[k] / reps for k in sorted(seen)}, {k: inconclusive[k] / reps for k in sorted(seen)})


def power(n: int, reps: int, seed: int) -> dict[str, float]:
    """Share of pairs with a 0.05 sd shift detected: profiles' KS/PSI vs scipy KS on raw values."""
    rng = np.random.default_rng(seed)
    hits: dict[str, int] = defaultdict(int)
    for _ in range(reps):
        base, raw_b = window(n, rng)
        cur, raw_c = window(n, rng, SHIFT)
        by = {r.check: r for r in evaluate_window(cur, base, CONFIG) if r.feature == "continuous"}
        hits["ks_profile"] += by["ks"].status == Status.DRIFT
        hits["ks_profile_inconclusive"] += by["ks"].status == Status.INCONCLUSIVE
        hits["psi_profile"] += by["psi"].status == Status.DRIFT
        hits["mean_shift_profile"] += by["mean_shift"].status == Status.DRIFT
        hits["ks_raw_scipy"] += stats.ks_2samp(raw_b, raw_c).pvalue < ALPHA
    return {k: v / reps for k, v in sorted(hits.items())}


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
    """Replications at window size n: ``budget`` pairs at small n, fewer as n grows."""
    return int(max(40, min(budget, budget * 10_000 // max(n, 1))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="n = 100 and 1000 only")
    ap.add_argument("--reps", type=int, default=1000, help="H0 pairs at small n")
    ap.add_argument("--seed", type=int, default=20240605)
    ap.add_argument("--small-sample", action="store_true",
                    help="only the PSI/JS small-sample null law and the power at alpha 1e-6")
    ap.add_argument("--small-sample-reps", type=int, default=2_000_000,
                    help="simulated H0 statistics per case (--small-sample)")
    ap.add_argument("--power-reps", type=int, default=1000, help="pairs for the power at 1e-6")
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
    sizes = [100, 1000] if args.quick else [100, 1000, 10_000, 100_000, 1_000_000]
    t0 = time.perf_counter()
    out: dict[str, dict] = {"fpr": {}, "inconclusive_rate": {}, "reps": {}}
    for n in sizes:
        reps = reps_for(n, args.reps)
        f, inc = fpr(n, n, reps, args.seed + n)
        out["fpr"][str(n)], out["inconclusive_rate"][str(n)], out["reps"][str(n)] = f, inc, reps
        print(f"n={n:>9} reps={reps:>5} " + " ".join(f"{k}={v:.3f}" for k, v in f.items()), flush=True)
    unequal = "50000x561000"
    f, inc = fpr(50_000, 561_000, 20 if args.quick else 60, args.seed)
    out["fpr"][unequal], out["inconclusive_rate"][unequal] = f, inc
    print(f"n={unequal} " + " ".join(f"{k}={v:.3f}" for k, v in f.items()), flush=True)
    checks = sorted({k for per_n in out["fpr"].values() for k in per_n})
    out["fpr_max"] = {k: max(per_n.get(k, 0.0) for per_n in out["fpr"].values()) for k in checks}
    # Equal sizes n: the sketch error 2 eps exceeds the KS critical distance when
    # KS_CRIT / sqrt(n / 2) < 2 eps.
    n_star = math.ceil(2 * (KS_CRIT / (2 * TDIGEST_RANK_ERROR)) ** 2)
    out["sketch_dominates_n"] = n_star
    power_sizes = [1000, 10_000, n_star, 100_000] if not args.quick else [1000]
    out["power"] = {str(n): power(n, 50 if n > 20_000 else 200, args.seed + 7 * n) for n in power_sizes}
    for n, pw in out["power"].items():
        print(f"power n={n}: " + " ".join(f"{k}={v:.2f}" for k, v in pw.items()), flush=True)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
