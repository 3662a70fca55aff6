"""Profile build throughput and size: fleetwatch profiles vs a pure sketch-update loop vs whylogs.

One window of ``--records`` records with 20 features (10 numeric with 2 % NaN,
10 categorical with 1,000 distinct values each and 1 % None) is profiled from
columnar batches of ``--batch`` records, four ways over the same data:

profile
    ``WindowProfile.add_columns`` per batch (numeric columns as float64 arrays,
    categorical columns as lists of str), then ``to_dict()`` (which flushes
    buffered values into the sketches); also with reference bins (each
    numeric feature counted in the 100 quantile bins of a reference of
    ``--records`` values of the same distributions, as for a model with a
    reference: ``binned_*``).
pure
    The practical limit: the sketches' own updates, with the same batching and
    nothing else. Per batch ``TDigest.update`` on each numeric column's non-NaN
    values and ``Counter.update`` on each categorical column; at the end the
    counts go to the frequent-items, count-min and CPC sketches and the digests
    are compressed. No missing-value or type handling, moments, min/max or
    exact-mode tracking.
whylogs
    ``DatasetProfile.track(pandas=batch)`` per batch, then ``view()``, in a
    separate interpreter (whylogs 1.6 needs numpy < 2: see docs/profiles.md)
    fed the same data through an .npz file. Skipped with a message when no
    interpreter with whylogs is given.
add_records
    ``WindowProfile.add_records`` per batch of ``PredictionRecord`` objects built
    beforehand, and ``add_columns`` with Python lists for every column (what the
    aggregator gets from the wire).

vector
    One 384-dimensional float32 embedding (``--embedding-dim``) per record besides
    the 20 features, as wire bytes (what the aggregator gets): the profile's
    build rate and size, and the vector profile's own serialized size before
    and after zlib (the budget: 64 KiB per 384-d feature and window).

Each is timed ``--repeat`` times and the best run kept. The profile's size is
compared with the records as JSON lines.

    python benchmarks/profile_build.py [--records 100000] [--batch 1000] [--repeat 3]
                                       [--whylogs-python /path/to/venv/bin/python]

Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from pathlib import Path

import msgpack
import numpy as np

N_NUMERIC = 10
N_CATEGORICAL = 10
CATEGORIES = 1_000


Columns = dict[str, np.ndarray]


def make_data(n: int, seed: int) -> tuple[Columns, Columns, Columns]:
    """Numeric columns (float64, NaN missing), categorical columns ('U' arrays) and their None masks."""
    rng = np.random.default_rng(seed)
    draws = [
        lambda: rng.normal(size=n),
        lambda: rng.lognormal(0.0, 2.0, n),
        lambda: rng.uniform(size=n),
        lambda: rng.exponential(size=n),
        lambda: np.where(rng.uniform(size=n) < 0.5, rng.normal(-3.0, 1.0, n), rng.normal(3.0, 0.5, n)),
        lambda: rng.normal(1e6, 1e3, n),
        lambda: rng.integers(0, 5_000, n).astype(np.float64),
        lambda: np.where(rng.uniform(size=n) < 0.7, 0.0, rng.lognormal(0.0, 1.0, n)),
        lambda: rng.pareto(2.0, n),
        lambda: 10.0 ** rng.uniform(-300, 300, n),
    ]
    numeric = {}
    for i, draw in enumerate(draws[:N_NUMERIC]):
        x = draw()
        x[rng.uniform(size=n) < 0.02] = np.nan
        numeric[f"num_{i}"] = x
    names = np.array([f"value_{i:04d}" for i in range(CATEGORIES)])
    categorical, missing = {}, {}
    for i in range(N_CATEGORICAL):
        idx = rng.zipf(1.2, n) % CATEGORIES if i % 2 == 0 else rng.integers(0, CATEGORIES, n)
        categorical[f"cat_{i}"] = names[idx]
        missing[f"cat_{i}"] = rng.uniform(size=n) < 0.01
    return numeric, categorical, missing


def batches(n: int, size: int) -> list[slice]:
    return [slice(s, min(s + size, n)) for s in range(0, n, size)]


def best_of(repeat: int, run) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - t)
    return best, result


# -- whylogs, in its own interpreter ------------------------------------------------------
def whylogs_worker(npz: str, batch: int, repeat: int) -> None:
    """Run inside the whylogs interpreter: print the best build time as JSON."""
    import pandas as pd
    import whylogs as why

    data = np.load(npz)
    n = data["n"].item()
    frames = []
    for s in batches(n, batch):
        cols = {k[4:]: data[k][s] for k in data.files if k.startswith("num:")}
        for k in data.files:
            if k.startswith("cat:"):
                col = data[k][s].astype(object)
                col[data["miss:" + k[4:]][s]] = None
                cols[k[4:]] = col
        frames.append(pd.DataFrame(cols))

    def run():
        profile = why.log(frames[0]).profile()
        for f in frames[1:]:
            profile.track(pandas=f)
        return profile.view()

    seconds, _ = best_of(repeat, run)
    print(json.dumps({"seconds": seconds, "whylogs": why.__version__, "numpy": np.__version__,
                      "pandas": pd.__version__}))


def run_whylogs(python: str, numeric, categorical, missing, n: int, batch: int, repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "data.npz"
        arrays = {f"num:{k}": v for k, v in numeric.items()}
        arrays |= {f"cat:{k}": v for k, v in categorical.items()}
        arrays |= {f"miss:{k}": v for k, v in missing.items()}
        np.savez(npz, n=np.array(n), **arrays)
        out = subprocess.run([python, __file__, "--whylogs-worker", str(npz), "--batch", str(batch),
                              "--repeat", str(repeat)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- fleetwatch -----------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--embedding-dim", type=int, default=384)
    ap.add_argument("--whylogs-python", default=os.environ.get("FLEETWATCH_WHYLOGS_PYTHON"),
                    help="interpreter with whylogs installed (default: $FLEETWATCH_WHYLOGS_PYTHON)")
    ap.add_argument("--whylogs-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.whylogs_worker:
        whylogs_worker(args.whylogs_worker, args.batch, args.repeat)
        return

    from sdk.columns import RecordColumns
    from sdk.record import PredictionRecord
    from sketches.bins import bin_templates, derive_edges
    from sketches.categorical import _Sketches
    from sketches.profile import WindowProfile
    from sketches.tdigest import TDigest

    n, values = args.records, args.records * (N_NUMERIC + N_CATEGORICAL)
    numeric, categorical, missing = make_data(n, args.seed)
    cat_lists = {k: [None if m else s for s, m in zip(v.tolist(), missing[k].tolist(), strict=True)]
                 for k, v in categorical.items()}
    parts = batches(n, args.batch)

    def columns(s: slice, numeric_as_lists: bool) -> RecordColumns:
        k = s.stop - s.start
        feats = {name: (x[s].tolist() if numeric_as_lists else x[s]) for name, x in numeric.items()}
        feats |= {name: col[s] for name, col in cat_lists.items()}
        return RecordColumns("model-1", ["1"] * k, [""] * k, [0.0] * k, feats)

    array_batches = [columns(s, False) for s in parts]
    list_batches = [columns(s, True) for s in parts]
    rows = [dict(zip(cat_lists, r, strict=True)) for r in zip(*cat_lists.values(), strict=True)]
    for name, x in numeric.items():
        for row, v in zip(rows, x.tolist(), strict=True):
            row[name] = None if v != v else v
    records = [PredictionRecord("model-1", "1", f"p{i}", 1_700_000_100.0 + i * 1e-3, row)
               for i, row in enumerate(rows)]
    record_batches = [records[s] for s in parts]

    ref_numeric, _c, _m = make_data(n, args.seed + 1)  # a reference of the same distributions
    templates = bin_templates({k: derive_edges(v) for k, v in ref_numeric.items()})

    def build(add, inputs, bins=None) -> WindowProfile:
        p = WindowProfile("model-1", 1_700_000_100, 300, bins=bins)
        for b in inputs:
            add(p, b)
        p.to_dict()  # flushes buffered values into the sketches
        return p

    def pure() -> None:
        digests = {k: TDigest() for k in numeric}
        counts = {k: Counter() for k in categorical}
        for s in parts:
            for k, x in numeric.items():
                x = x[s]
                digests[k].update(x[~np.isnan(x)])
            for k, col in cat_lists.items():
                counts[k].update(col[s])
        for d in digests.values():
            d.centroid_count  # noqa: B018 (compresses the buffer)
        for c in counts.values():
            c.pop(None, None)
            _Sketches().update(c)

    t_profile, profile = best_of(args.repeat, lambda: build(WindowProfile.add_columns, array_batches))
    t_binned, binned = best_of(args.repeat,
                               lambda: build(WindowProfile.add_columns, array_batches, templates))
    t_pure, _ = best_of(args.repeat, pure)
    t_lists, _ = best_of(args.repeat, lambda: build(WindowProfile.add_columns, list_batches))
    t_records, _ = best_of(args.repeat, lambda: build(WindowProfile.add_records, record_batches))
    t_bytes, blob = best_of(args.repeat, profile.to_bytes)
    vectors = np.random.default_rng(args.seed + 2).standard_normal((n, args.embedding_dim), dtype=np.float32)
    vector_batches = []
    for b, s in zip(array_batches, parts, strict=True):
        vb = RecordColumns(b.model_id, b.model_version, [f"p{i}" for i in range(s.start, s.stop)],
                           b.event_time, b.features)
        vb.vectors = {"embedding": [v.tobytes() for v in vectors[s]]}
        vector_batches.append(vb)
    t_vector, with_vector = best_of(args.repeat, lambda: build(WindowProfile.add_columns, vector_batches))
    vector_doc = msgpack.packb(with_vector.vectors["embedding"].to_dict(), use_bin_type=True)
    binned_blob = binned.to_bytes()
    raw_json = sum(len(json.dumps({"model_id": r.model_id, "model_version": r.model_version,
                                   "prediction_id": r.prediction_id, "event_time": r.event_time,
                                   "features": r.features})) + 1 for r in records)
    result = {
        "records": n, "batch": args.batch, "features": N_NUMERIC + N_CATEGORICAL,
        "records_per_s": n / t_profile, "values_per_s": values / t_profile,
        "pure_records_per_s": n / t_pure, "pure_values_per_s": values / t_pure,
        "ratio_vs_pure": t_pure / t_profile,
        "list_columns_records_per_s": n / t_lists,
        "add_records_records_per_s": n / t_records, "add_records_values_per_s": values / t_records,
        "profile_bytes": len(blob), "to_bytes_ms": t_bytes * 1e3,
        "binned_records_per_s": n / t_binned, "binned_profile_bytes": len(binned_blob),
        "raw_json_bytes": raw_json, "compression_ratio": raw_json / len(blob),
        "embedding_dim": args.embedding_dim, "with_embedding_records_per_s": n / t_vector,
        "with_embedding_profile_bytes": len(with_vector.to_bytes()),
        "vector_profile_bytes": len(vector_doc),
        "vector_profile_zlib_bytes": len(zlib.compress(vector_doc, 6)),
        "vector_profile_budget_bytes": 64 * 1024,
    }
    print(f"profile (add_columns): {n / t_profile:,.0f} records/s, {values / t_profile:,.0f} values/s")
    print(f"profile with reference bins: {n / t_binned:,.0f} records/s, {len(binned_blob):,} bytes "
          f"({len(binned_blob) / 1024:.1f} KiB)")
    print(f"pure sketch-update loop: {n / t_pure:,.0f} records/s (profile / pure = {t_pure / t_profile:.2f})")
    print(f"add_columns (Python lists): {n / t_lists:,.0f} records/s")
    print(f"add_records: {n / t_records:,.0f} records/s")
    print(f"profile: {len(blob):,} bytes ({len(blob) / 1024:.1f} KiB), to_bytes {t_bytes * 1e3:.1f} ms; "
          f"records as JSON lines: {raw_json:,} bytes = {raw_json / len(blob):,.0f} x")
    print(f"with a {args.embedding_dim}-d embedding: {n / t_vector:,.0f} records/s; its vector profile "
          f"{len(vector_doc):,} bytes ({len(vector_doc) / 1024:.1f} KiB), "
          f"{result['vector_profile_zlib_bytes'] / 1024:.1f} KiB after zlib")
    if args.whylogs_python:
        w = run_whylogs(args.whylogs_python, numeric, categorical, missing, n, args.batch, args.repeat)
        result |= {"whylogs_records_per_s": n / w["seconds"], "whylogs_values_per_s": values / w["seconds"],
                   "ratio_vs_whylogs": w["seconds"] / t_profile, "whylogs_version": w["whylogs"],
                   "whylogs_numpy": w["numpy"]}
        print(f"whylogs {w['whylogs']} (numpy {w['numpy']}, pandas {w['pandas']}): "
              f"{n / w['seconds']:,.0f} records/s (profile / whylogs = {w['seconds'] / t_profile:.1f})")
    else:
        print("whylogs: skipped (pass --whylogs-python or set FLEETWATCH_WHYLOGS_PYTHON)", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
