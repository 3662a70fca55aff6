"""Server time of the dashboard's pages on a fleet of stored profiles and results.

A fleet of models (default 1,000) with 20 features each (14 numeric, 6 categorical; the
windows of ``benchmarks/detect.py``) is written to an embedded Redis as the pipeline
writes it: model configurations (owners, tiers, feature lineage), a reference profile
per model, ``--windows`` closed windows per model through the aggregator's checkpoint
(the real window index and profile keys), every window's tier-1 test results as the
detector stores them, and -- for one model in twenty, whose windows drift -- the alert
policy applied to each window (FDR gate, persistence, incidents grouped by source). Then
the timed part requests the pages in-process (httpx over ASGI: routing, Redis reads and
template rendering, no network) and reports p50 / p95 per page:

- ``fleet``: the fleet overview (default sort; a later page sorted by model; filtered
  to critical models),
- ``model``: model pages of random models,
- ``incident``: the incident pages,

each after one untimed warm-up request per page kind (``fleet_cold_ms`` is the first
request after start-up: it compiles the templates). Each window's record count is stored
with its results, as the detector does.
``cpu_p50_ms`` / ``cpu_p95_ms`` are this process's CPU time per request (Redis's own
work excluded): the figures to read when the machine is shared with other work.

Usage::

    python benchmarks/dashboard.py                 # 1,000 models x 20 features, 12 windows
    python benchmarks/dashboard.py --models 200 --requests 20

The last line printed is JSON. Goal: p95 <= 300 ms per page on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from detect import N_CATEGORICAL, N_NUMERIC, profile_of, raw_columns  # noqa: E402

from detectors.suite import alerting_checks, evaluate_window  # noqa: E402
from service.alerting.fdr import FdrGate, spending  # noqa: E402
from service.alerting.policy import AlertPolicy, WindowRef  # noqa: E402
from service.alerting.store import AlertStore  # noqa: E402
from service.api.app import create_app  # noqa: E402
from service.embedded import redis_server  # noqa: E402
from service.profiles.checkpoints import ClosedWindow  # noqa: E402
from service.profiles.keys import (
    WINDOWS_STREAM,  # noqa: E402
    window_member,
)
from service.profiles.store import Store
from service.registry import ModelConfig  # noqa: E402
from service.settings import Settings  # noqa: E402

WINDOW = 300
T0 = 1_700_000_100 - 1_700_000_100 % WINDOW
SOURCES = [f"source{i}" for i in range(10)]
OWNERS = [f"team{i}" for i in range(20)]
SICK_EVERY = 20


def config_of(m: int) -> ModelConfig:
    features = {
        f"num{j}": {"type": "numeric", "source": SOURCES[(m + j) % len(SOURCES)]} for j in range(N_NUMERIC)
    }
    features |= {
        f"cat{j}": {"type": "categorical", "source": SOURCES[(m + j) % len(SOURCES)]}
        for j in range(N_CATEGORICAL)
    }
    return ModelConfig.model_validate(
        {"window_seconds": WINDOW, "owner": OWNERS[m % len(OWNERS)], "tier": 1 + m % 3, "features": features}
    )


async def populate(store: Store, settings: Settings, models: int, windows: int, seed: int) -> dict:
    """Write the fleet; returns counts of what was written."""
    rng = np.random.default_rng(seed)
    reference, bins = profile_of("ref", raw_columns(rng, 5_000, 0.0), 0)
    healthy, sick = [], []
    for w in range(windows):  # window profiles shared by the models (their bytes only)
        for shift, out in ((0.0, healthy), (1.5, sick)):
            cols = raw_columns(rng, int(rng.integers(800, 1200)), shift)
            p = profile_of("m", cols, T0 + w * WINDOW, bins)[0]  # counted in the reference's bins
            results = evaluate_window(p, reference, volume_history=[1000, 980, 1030, 1010])
            out.append((p.to_bytes(), results, [{**asdict(r), "baseline": "reference"} for r in results],
                        p.count))
    alerting = alerting_checks(reference)
    policy = AlertPolicy(AlertStore(store.r), FdrGate(store.r, spending(settings)))
    checkpoint = await store.acquire_partition("bench", 0)
    written = 0
    for m in range(models):
        model_id = f"model-{m:04d}"
        cfg = config_of(m)
        await store.put_model_config(model_id, cfg)
        await store.put_reference(model_id, reference)
        bad = m % SICK_EVERY == 0
        series = sick if bad else healthy
        closed = [
            ClosedWindow(model_id, window_member(WINDOW, T0 + w * WINDOW, "1"), T0 + w * WINDOW, b)
            for w, (b, _r, _s, _n) in enumerate(series)
        ]
        assert await store.checkpoint(
            "bench", 0, checkpoint.epoch, {}, [], closed, settings.retention_window_seconds
        )
        for w, (_b, results, stored, count) in enumerate(series):
            member = closed[w].member
            await store.put_results(model_id, member, stored, settings.retention_window_seconds, count)
            if bad:
                await policy.apply(
                    WindowRef(model_id, member, T0 + w * WINDOW, WINDOW, "1"),
                    results,
                    alerting,
                    cfg,
                    [],
                    time.time(),
                )
            written += 1
    await store.r.delete(WINDOWS_STREAM)  # no detector reads the window-closed events here
    return {"windows_written": written}


def quantiles(ms: list[float]) -> dict[str, float]:
    q = statistics.quantiles(ms, n=20, method="inclusive")
    return {"p50_ms": round(statistics.median(ms), 1), "p95_ms": round(q[18], 1), "n": len(ms)}


async def bench(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="fw-dash-") as tmp:
        server = redis_server(Path(tmp))
        server.start()
        try:
            settings = Settings(redis_url=f"redis://127.0.0.1:{server.port}/0", window_seconds=WINDOW)
            store = Store(settings.redis_url, settings.redis_cluster)
            t0 = time.perf_counter()
            written = await populate(store, settings, args.models, args.windows, args.seed)
            build = time.perf_counter() - t0
            app = create_app(settings, store)
            alerts = AlertStore(store.r)
            incidents = [i.id for i in await alerts.incidents(0, 100)]
            rnd = random.Random(args.seed)
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://bench"
            ) as http:
                cpu: dict[str, list[float]] = {}

                async def timed(path: str, kind: str = "") -> float:
                    t, c = time.perf_counter(), time.process_time()
                    got = await http.get(path)
                    assert got.status_code == 200, (path, got.status_code, got.text[:300])
                    cpu.setdefault(kind, []).append(1000 * (time.process_time() - c))
                    return 1000 * (time.perf_counter() - t)

                cold = await timed("/ui")
                fleet_paths = ["/ui", "/ui?sort=model&page=7", "/ui?health=critical"]
                pages = {
                    "fleet": [fleet_paths[i % 3] for i in range(args.requests)],
                    "model": [
                        f"/ui/models/model-{rnd.randrange(args.models):04d}" for _ in range(args.requests)
                    ],
                    "incident": [
                        f"/ui/incidents/{incidents[i % len(incidents)]}" for i in range(args.requests)
                    ],
                }
                out: dict = {}
                for name, paths in pages.items():
                    await timed(paths[0])  # warm-up
                    out[name] = quantiles([await timed(p, name) for p in paths])
                    spent = quantiles(cpu[name])
                    out[name] |= {"cpu_p50_ms": spent["p50_ms"], "cpu_p95_ms": spent["p95_ms"]}
            await store.close()
        finally:
            server.stop()
    return {
        "load_average_1m": round(os.getloadavg()[0], 1),  # the machine is shared: read the CPU figures
        "cpus": os.cpu_count(),
        "models": args.models,
        "features_per_model": N_NUMERIC + N_CATEGORICAL,
        "windows_per_model": args.windows,
        "incidents": len(incidents),
        "build_seconds": round(build, 1),
        "fleet_cold_ms": round(cold, 1),
        **written,
        **out,
        "goal_p95_ms": 300,
        "meets_goal": all(v["p95_ms"] <= 300 for v in out.values()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=1_000)
    ap.add_argument("--windows", type=int, default=12, help="Closed windows per model")
    ap.add_argument("--requests", type=int, default=30, help="Timed requests per page kind")
    ap.add_argument("--seed", type=int, default=0)
    print(json.dumps(asyncio.run(bench(ap.parse_args()))))


if __name__ == "__main__":
    main()
