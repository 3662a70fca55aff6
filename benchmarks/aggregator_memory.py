"""Peak RSS of one aggregator process holding 1,000 active models x 20 features.

Produces 1,000 models x 200 records (20 features: 10 numeric, 10 categorical with
1,000 distinct values) into an embedded broker, runs `fleetwatch aggregate` with
windows held open (so every model's profile is in memory at once), and reports
the process's peak RSS once all records are aggregated. Goal: <= 1 GiB.

    python benchmarks/aggregator_memory.py [--models 1000] [--per-model 200]

Last line: JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import harness
import workload

from service.embedded import free_port
from service.kafka import ensure_topics
from service.runtime.infrastructure import infrastructure
from service.settings import Settings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=1_000)
    ap.add_argument("--per-model", type=int, default=200)
    args = ap.parse_args()
    recs = workload.records(args.models, args.per_model)
    with tempfile.TemporaryDirectory() as tmp:
        base = Settings(kafka_bootstrap=None, redis_url=None, data_dir=Path(tmp), topic_partitions=8,
                        embedded_broker_storage="memory")  # measures the aggregator, not the broker's disk
        with infrastructure(base) as s:
            asyncio.run(ensure_topics(s))
            asyncio.run(workload.produce(s.kafka_bootstrap, s.predictions_topic, recs))
            port = free_port()
            proc = harness.aggregator({
                "FLEETWATCH_KAFKA_BOOTSTRAP": s.kafka_bootstrap, "FLEETWATCH_REDIS_URL": s.redis_url,
                "FLEETWATCH_IDLE_CLOSE_SECONDS": "3600", "FLEETWATCH_CHECKPOINT_INTERVAL_SECONDS": "5",
            }, port)
            try:
                deadline = time.monotonic() + 600
                while harness.metric(port, "fleetwatch_records_aggregated") < len(recs):
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SystemExit("aggregator did not finish")
                    time.sleep(0.5)
                time.sleep(6)  # one more checkpoint: serialisation of every open window
                rss = harness.peak_rss_bytes(proc.pid)
                open_windows = harness.metric(port, "fleetwatch_open_windows")
            finally:
                proc.terminate()
                proc.wait(60)
    result = {"models": args.models, "features": 20, "records": len(recs),
              "open_windows": open_windows, "peak_rss_bytes": rss,
              "peak_rss_mib": round(rss / 2**20, 1), "goal_mib": 1024,
              "ratio_to_goal": round(rss / 2**30, 3)}
    print(f"peak RSS {result['peak_rss_mib']} MiB for {args.models} models x 20 features "
          f"({open_windows:.0f} open windows)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
