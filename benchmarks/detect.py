"""Throughput of the tier-1 detectors on stored profiles, against Evidently on raw data.

A fleet of models (default 1,000) with 20 features each (14 numeric, 6
categorical), a score and a predicted label: each model's reference profile
(5,000 records; numeric features and the score counted in the 100 quantile
bins derived from its values, as at a reference upload) and one current
window (1,000 records, counted in the same bins) are built, serialised
as stored (``WindowProfile.to_bytes``), then the timed part deserialises both
and runs every tier-1 check (:func:`detectors.suite.evaluate_window`, all
checks, floors and alpha of the defaults, a volume history). ``ms_per_test``
is wall-clock time; ``cpu_ms_per_test`` is this process's CPU time over the
same calls, the figure to read on a machine shared with other work.

Evidently's ``DataDriftPreset`` runs on the raw values of the same windows of
the first ``--evidently-models`` models, in the same run (in-process when
``evidently`` imports, else with ``--evidently-python``, e.g. a separate venv,
because Evidently pins libraries this project does not). The ratio compares
seconds per tested column.

Usage::

    python benchmarks/detect.py                       # 1,000 models x 20 features
    python benchmarks/detect.py --models 100 --evidently-python /tmp/evvenv/bin/python

The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N_NUMERIC, N_CATEGORICAL = 14, 6
N_REF, N_CUR = 5_000, 1_000


def raw_columns(rng: np.random.Generator, n: int, shift: float) -> dict[str, np.ndarray]:
    """One window's raw values: numeric columns of varied shapes, categorical ones as codes."""
    cols: dict[str, np.ndarray] = {}
    for j in range(N_NUMERIC):
        kind = j % 4
        if kind == 0:
            cols[f"num{j}"] = rng.normal(shift, 1, n)
        elif kind == 1:
            cols[f"num{j}"] = rng.lognormal(shift, 1, n)
        elif kind == 2:
            cols[f"num{j}"] = rng.poisson(3 + shift, n).astype(np.float64)  # exact mode
        else:
            cols[f"num{j}"] = np.where(rng.random(n) < 0.3, 0.0, rng.exponential(1 + shift, n))
    for j in range(N_CATEGORICAL):
        k = (5, 20, 400)[j % 3]
        cols[f"cat{j}"] = np.minimum(rng.zipf(1.5, n), k) - 1
    cols["score"] = rng.beta(2 + shift, 5, n)
    return cols


def profile_of(model: str, cols: dict[str, np.ndarray], start: int, bins: dict | None = None):
    """A window's profile; ``bins`` None: a reference, whose bin edges are derived from its
    values (as at upload) and returned with it, else the reference's bins to count in."""
    from sketches.bins import BinCounts, derive_edges
    from sketches.numeric import NumericSketch
    from sketches.profile import FeatureProfile, WindowProfile

    n = cols["score"].size
    p = WindowProfile(model, start, 300)
    p.count = n
    if bins is None:
        bins = {k: BinCounts(derive_edges(v), source=True)
                for k, v in cols.items() if not k.startswith("cat")}
    else:
        bins = {k: b.empty_like() for k, b in bins.items()}
    for name, values in cols.items():
        if name == "score":
            continue
        f = FeatureProfile()
        if name.startswith("num"):
            f.numeric = NumericSketch.binned(bins[name])
            f.numeric.update(values)
        else:
            codes, counts = np.unique(values, return_counts=True)
            f.categorical.update_counts({f"v{c}": int(k) for c, k in zip(codes, counts, strict=True)})
        p.features[name] = f
    p.score = NumericSketch.binned(bins["score"])
    p.score.update(cols["score"])
    positives = int((cols["score"] >= 0.5).sum())
    p.prediction.update_counts({"true": positives, "false": n - positives})
    return p, bins


def fleetwatch_side(models: int, keep_raw: int, seed: int) -> tuple[dict, list]:
    from detectors.suite import evaluate_window
    from sketches.profile import WindowProfile

    rng = np.random.default_rng(seed)
    stored, raw = [], []
    t0 = time.perf_counter()
    for m in range(models):
        shift = 0.3 if m % 10 == 0 else 0.0  # one model in ten drifts
        ref_cols, cur_cols = raw_columns(rng, N_REF, 0.0), raw_columns(rng, N_CUR, shift)
        ref, bins = profile_of(f"m{m}", ref_cols, 0)
        stored.append((ref.to_bytes(), profile_of(f"m{m}", cur_cols, 300, bins)[0].to_bytes()))
        if m < keep_raw:
            raw.append((ref_cols, cur_cols))
    build = time.perf_counter() - t0
    history = [1000, 980, 1030, 1010]
    tests, t_load, t_detect, cpu_detect, drift = 0, 0.0, 0.0, 0.0, 0
    for ref_b, cur_b in stored:
        t1 = time.perf_counter()
        ref, cur = WindowProfile.from_bytes(ref_b), WindowProfile.from_bytes(cur_b)
        t2, c2 = time.perf_counter(), time.process_time()
        results = evaluate_window(cur, ref, volume_history=history)
        t3, c3 = time.perf_counter(), time.process_time()
        t_load, t_detect, cpu_detect = t_load + t2 - t1, t_detect + t3 - t2, cpu_detect + c3 - c2
        tests += len(results)
        drift += sum(r.status.value == "drift" for r in results)
    return {
        "models": models,
        "features_per_model": N_NUMERIC + N_CATEGORICAL,
        "tests": tests,
        "tests_per_second": round(tests / t_detect),
        "ms_per_test": round(1000 * t_detect / tests, 4),
        "cpu_ms_per_test": round(1000 * cpu_detect / tests, 4),
        "ms_per_model_detect": round(1000 * t_detect / models, 3),
        "ms_per_model_deserialize": round(1000 * t_load / models, 3),
        "drift_results": drift,
        "build_seconds": round(build, 1),
    }, raw


def evidently_worker(path: str) -> None:
    """Run Evidently's DataDriftPreset on each saved model's raw windows; print JSON seconds."""
    import pandas as pd
    from evidently import Report
    from evidently.presets import DataDriftPreset

    data = np.load(path)
    models = int(data["models"])
    frames = []
    for m in range(models):
        cols = [k.split("/", 2)[2] for k in data.files if k.startswith(f"{m}/ref/")]
        ref = pd.DataFrame({c: data[f"{m}/ref/{c}"] for c in cols})
        cur = pd.DataFrame({c: data[f"{m}/cur/{c}"] for c in cols})
        for c in cols:
            if c.startswith("cat"):
                ref[c], cur[c] = ref[c].astype(str), cur[c].astype(str)
        frames.append((ref, cur))
    t0 = time.perf_counter()
    for ref, cur in frames:
        Report([DataDriftPreset()]).run(cur, ref)
    print(json.dumps({"seconds": time.perf_counter() - t0, "models": models,
                      "columns": int(frames[0][0].shape[1])}))


def evidently_side(raw: list, python: str | None) -> dict | None:
    if not raw:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "raw.npz"
        arrays = {"models": np.array(len(raw))}
        for m, (ref, cur) in enumerate(raw):
            arrays.update({f"{m}/ref/{k}": v for k, v in ref.items()})
            arrays.update({f"{m}/cur/{k}": v for k, v in cur.items()})
        np.savez(path, **arrays)
        cmd = [python or sys.executable, __file__, "--evidently-worker", str(path)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if run.returncode != 0:
        return {"error": run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "failed"}
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=1000)
    ap.add_argument("--evidently-models", type=int, default=20)
    ap.add_argument("--evidently-python", default=None,
                    help="Interpreter with evidently installed (default: this one)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--evidently-worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.evidently_worker:
        evidently_worker(args.evidently_worker)
        return
    ours, raw = fleetwatch_side(args.models, args.evidently_models, args.seed)
    print(f"fleetwatch: {ours['tests']} tests on {ours['models']} models: "
          f"{ours['tests_per_second']} tests/s, {ours['ms_per_test']} ms/test "
          f"({ours['cpu_ms_per_test']} ms CPU)", flush=True)
    ev = evidently_side(raw, args.evidently_python)
    out = {**ours, "goal_ms_per_test": 0.5, "evidently": ev}
    if ev and "seconds" in ev:
        ours_per_model = ours["ms_per_model_detect"] + ours["ms_per_model_deserialize"]
        ev_per_model = 1000 * ev["seconds"] / ev["models"]
        out["evidently_ms_per_model"] = round(ev_per_model, 1)
        out["speedup_vs_evidently_per_model"] = round(ev_per_model / ours_per_model, 1)
        print(f"evidently DataDriftPreset: {ev_per_model:.1f} ms/model on raw data "
              f"({ev['columns']} columns)", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
