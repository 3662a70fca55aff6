"""Calibration and power of the vector (embedding) tests, on vector profiles.

Data: 384-dimensional embeddings from a mixture of 20 Gaussian "topics": topic
``t`` has centre ``c_t`` (independent N(0, I), fixed by the seed) and
weight proportional to ``1 / (t + 1)`` (the first topic holds 28 % of the
mass); a vector is its topic's centre plus N(0, I) noise, in float32.

- ``fpr``: under H0 the baseline and the window are independent windows of
  ``n`` vectors of the same mixture; each test runs through
  :func:`detectors.suite.evaluate_window` with every floor 0 (the point null,
  the hardest case) at alpha = 0.05. A calibrated test alarms in ~5 % of pairs.
- ``norm_shift`` once more on 2,000 pairs per n (``"embedding/norm_shift_many/n"``):
  the norms of the same mixture drawn from their exact law (``‖c_t + ε‖²`` is
  noncentral chi-square with 384 degrees of freedom and noncentrality
  ``‖c_t‖²``) into the profiles' norm sketches, since the check reads nothing
  else: 20 times the pairs of the full simulation for the same CPU.
- ``power``: 1,000 vectors per side, the defaults (floors of
  :data:`detectors.catalog.DEFAULT_FLOORS`): ``topic_shift`` moves 10 % of
  the mass from the first topic to the last; ``norm_inflation`` multiplies
  every vector by 1.2.

Run alone (``python benchmarks/calibration_vectors.py``) or as part of
``benchmarks/calibration.py``; the last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

import numpy as np

from detectors.catalog import CHECKS_BY_TARGET, DEFAULT_FLOORS
from detectors.config import DetectorConfig
from detectors.result import Status
from detectors.suite import evaluate_window
from sketches.profile import WindowProfile
from sketches.vector import VectorProfile

ALPHA = 0.05
DIM = 384
TOPICS = 20
CENTRE_SD = 1.0
CLOSE_CENTRE_SD = 0.5
MOVED = 0.1
INFLATION = 1.2
FEATURE = "embedding"
CHECKS = CHECKS_BY_TARGET["vector"]
POINT_NULL = DetectorConfig(alpha=ALPHA, floors=dict.fromkeys(DEFAULT_FLOORS, 0.0))
DEFAULTS = DetectorConfig(alpha=ALPHA)
SIZES = (100, 1_000, 10_000, 100_000)
REPS = {100: 400, 1_000: 400, 10_000: 200, 100_000: 100}


class Mixture:
    """The topic mixture, and windows of it."""

    def __init__(self, seed: int, centre_sd: float = CENTRE_SD) -> None:
        rng = np.random.default_rng(seed)
        self.centres = (centre_sd * rng.standard_normal((TOPICS, DIM))).astype(np.float32)
        w = 1.0 / np.arange(1, TOPICS + 1)
        self.weights = w / w.sum()

    def moved(self) -> np.ndarray:
        """The weights with MOVED of the mass moved from the first topic to the last."""
        w = self.weights.copy()
        w[0] -= MOVED
        w[-1] += MOVED
        return w

    def window(self, n: int, rng: np.random.Generator, weights: np.ndarray | None = None,
               scale: float = 1.0, tag: str = "") -> WindowProfile:
        """A window profile of ``n`` vectors (built in batches of 1,000, as the aggregator does)."""
        p = WindowProfile("calibration", 0, 300)
        vp = p.vectors[FEATURE] = VectorProfile(DIM)
        for s in range(0, n, 1_000):
            m = min(1_000, n - s)
            topic = rng.choice(TOPICS, m, p=self.weights if weights is None else weights)
            x = self.centres[topic] + rng.standard_normal((m, DIM), dtype=np.float32)
            if scale != 1.0:
                x *= np.float32(scale)
            vp.update(x, [f"{tag}{s + i}" for i in range(m)])
        p.count = n
        return p


def _decisions(cur: WindowProfile, base: WindowProfile, config: DetectorConfig) -> dict[str, Status]:
    return {r.check: r.status for r in evaluate_window(cur, base, config) if r.feature == FEATURE}


def fpr(n: int, reps: int, seed: int) -> dict[str, float]:
    """Per check: the share of H0 pairs of ``n`` vectors each with status drift."""
    mix = Mixture(seed)
    rng = np.random.default_rng(seed + 1)
    drift: dict[str, int] = defaultdict(int)
    for r in range(reps):
        base, cur = mix.window(n, rng, tag=f"b{r}-"), mix.window(n, rng, tag=f"c{r}-")
        for check, status in _decisions(cur, base, POINT_NULL).items():
            drift[check] += status == Status.DRIFT
    return {c: drift[c] / reps for c in CHECKS}


def norm_fpr(n: int, reps: int, seed: int) -> float:
    """The share of H0 pairs with status drift of ``norm_shift``, norms drawn from their exact law."""
    from detectors.drift.embedding.norm import norm_shift_test

    mix = Mixture(seed)
    rng = np.random.default_rng(seed + 3)
    nc = (mix.centres.astype(np.float64) ** 2).sum(axis=1)

    def side() -> VectorProfile:
        vp = VectorProfile(DIM)
        topic = rng.choice(TOPICS, n, p=mix.weights)
        vp.norms.update(np.sqrt(rng.noncentral_chisquare(DIM, nc[topic])))
        vp.count = n
        return vp

    alarms = sum(norm_shift_test(side(), side(), alpha=ALPHA).status == Status.DRIFT for _ in range(reps))
    return alarms / reps


def power(n: int, reps: int, seed: int) -> dict[str, float]:
    """Per "alternative/check": the share of pairs with status drift, at the default floors."""
    mix, close = Mixture(seed), Mixture(seed, CLOSE_CENTRE_SD)
    rng = np.random.default_rng(seed + 2)
    drift: dict[str, int] = defaultdict(int)
    for r in range(reps):
        base, base_close = mix.window(n, rng, tag=f"b{r}-"), close.window(n, rng, tag=f"bc{r}-")
        for name, cur, ref in (("topic_shift", mix.window(n, rng, mix.moved(), tag=f"t{r}-"), base),
                               ("topic_shift_close", close.window(n, rng, close.moved(), tag=f"tc{r}-"),
                                base_close),
                               ("norm_inflation", mix.window(n, rng, scale=INFLATION, tag=f"s{r}-"), base)):
            for check, status in _decisions(cur, ref, DEFAULTS).items():
                drift[f"{name}/{check}"] += status == Status.DRIFT
    return {k: drift[k] / reps for k in sorted(drift)}


def run(sizes=SIZES, power_n: int = 1_000, power_reps: int = 200, seed: int = 20_261_201,
        reps_scale: float = 1.0) -> dict[str, dict[str, float]]:
    """``fpr`` (``"embedding/check/n"`` -> rate) and ``power`` (``"alternative/check/n"`` -> rate)."""
    out: dict[str, dict[str, float]] = {"fpr": {}, "power": {}, "reps": {}}
    for n in sizes:
        reps = max(50, int(REPS.get(n, 100) * reps_scale))
        f = fpr(n, reps, seed + n)
        out["reps"][str(n)] = reps
        out["fpr"].update({f"{FEATURE}/{c}/{n}": v for c, v in f.items()})
        out["fpr"][f"{FEATURE}/norm_shift_many/{n}"] = norm_fpr(n, 2_000, seed + 5 * n)
        print(f"vectors n={n:>7} reps={reps:>4} fpr " + " ".join(f"{c}={v:.3f}" for c, v in f.items())
              + f"; norm_shift on 2000 pairs {out['fpr'][f'{FEATURE}/norm_shift_many/{n}']:.3f}", flush=True)
    if power_reps:
        p = power(power_n, power_reps, seed + 7)
        out["power"] = {f"{k}/{power_n}": v for k, v in p.items()}
        print(f"vectors power n={power_n}: " + " ".join(f"{k}={v:.2f}" for k, v in p.items()), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",") if x], default=list(SIZES))
    ap.add_argument("--power-reps", type=int, default=200)
    ap.add_argument("--reps-scale", type=float, default=1.0, help="multiply the H0 pairs per size")
    ap.add_argument("--seed", type=int, default=20_261_201)
    args = ap.parse_args()
    t0 = time.perf_counter()
    out = run(args.sizes, power_reps=args.power_reps, seed=args.seed, reps_scale=args.reps_scale)
    out["fpr_max"] = {c: max(v for k, v in out["fpr"].items() if k.split("/")[1] == c)
                      for c in (*CHECKS, "norm_shift_many")}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
