"""Ingest throughput: broker -> aggregator -> Redis, for 1 and 2 aggregator processes.

Produces a fixed workload (20 features: 10 numeric, 10 categorical) into an
embedded broker once, then for each process count starts that many
`fleetwatch aggregate` processes in a fresh consumer group (Redis emptied) and
times from the first to the last record aggregated. The reference, measured in
the same run, is the broker's own consume rate: one plain aiokafka consumer
reading every message without decoding it. Goal: >= 200k records/s per process.

    python benchmarks/ingest.py [--models 200] [--per-model 500]

Last line: JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path

import harness
import redis
import workload
from aiokafka import AIOKafkaConsumer

from service.embedded import free_port
from service.kafka import ensure_topics
from service.runtime import infrastructure
from service.settings import Settings


async def broker_consume_rate(bootstrap: str, topic: str, messages: int, per_message: int) -> float:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"ref-{uuid.uuid4().hex}",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        seen, t0 = 0, None
        while seen < messages:
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            if batch and t0 is None:
                t0 = time.perf_counter()
            seen += sum(len(m) for m in batch.values())
        return messages * per_message / (time.perf_counter() - t0)
    finally:
        await consumer.stop()


def aggregate_rate(s: Settings, processes: int, total: int) -> float:
    redis.Redis.from_url(s.redis_url).flushdb()
    env = {"FLEETWATCH_KAFKA_BOOTSTRAP": s.kafka_bootstrap, "FLEETWATCH_REDIS_URL": s.redis_url,
           "FLEETWATCH_AGGREGATOR_GROUP": f"bench-{uuid.uuid4().hex}",
           "FLEETWATCH_IDLE_CLOSE_SECONDS": "3600", "FLEETWATCH_CHECKPOINT_INTERVAL_SECONDS": "2"}
    ports = [free_port() for _ in range(processes)]
    procs = [harness.aggregator(env, p) for p in ports]
    try:
        t0 = None
        deadline = time.monotonic() + 900
        while True:
            done = sum(harness.metric(p, "fleetwatch_records_aggregated") for p in ports)
            if done and t0 is None:
                t0 = time.perf_counter()
            if done >= total:
                return total / (time.perf_counter() - t0)
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise SystemExit("aggregators did not finish")
            time.sleep(0.05)
    finally:
        for p in procs:
            p.terminate()
            p.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--per-model", type=int, default=500)
    args = ap.parse_args()
    recs = workload.records(args.models, args.per_model)
    per_message = 500
    with tempfile.TemporaryDirectory() as tmp:
        base = Settings(kafka_bootstrap=None, redis_url=None, data_dir=Path(tmp), topic_partitions=8)
        with infrastructure(base) as s:
            asyncio.run(ensure_topics(s))
            messages = asyncio.run(workload.produce(s.kafka_bootstrap, s.predictions_topic, recs,
                                                    per_message))
            reference = asyncio.run(broker_consume_rate(s.kafka_bootstrap, s.predictions_topic,
                                                        messages, per_message))
            rates = {n: aggregate_rate(s, n, len(recs)) for n in (1, 2)}
    result = {
        "records": len(recs), "features": 20,
        "broker_consume_records_per_s": round(reference),
        "records_per_s_1_process": round(rates[1]),
        "records_per_s_2_processes_total": round(rates[2]),
        "records_per_s_2_processes_per_process": round(rates[2] / 2),
        "ratio_1_process_to_broker": round(rates[1] / reference, 3),
        "goal_records_per_s_per_process": 200_000,
    }
    print(f"aggregator: {rates[1]:,.0f} records/s (1 process), {rates[2]:,.0f} records/s (2 processes); "
          f"broker consume reference {reference:,.0f} records/s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
