"""Ingest throughput: broker -> aggregator -> Redis, for 1 and 2 aggregator processes.

Produces a fixed workload (20 features: 10 numeric, 10 categorical; by default
200 models x 500 records, produced 5 times) into an embedded broker once, then
for each process count starts that many `fleetwatch aggregate` processes in a
fresh consumer group (Redis emptied) and times from the first to the last record
aggregated. The 1-process run is made ``--runs`` times (3), interleaved with the others,
and its figures are those of the median run by wall-clock rate (every run's rates are
listed too): this machine's speed swings between runs, and one run says little. A flush
request per model follows its records, so the workload's windows close and are stored
within the run: each process's CPU time
(/proc/<pid>/stat) is read from its first record aggregated to the moment every
window is stored, so that ``records_per_cpu_s_*`` pays for everything the records
cost (decoding, profiling, checkpoints, closing and storing their windows), and is
less sensitive than the wall-clock rates to other work on a shared machine.
Completion is polled on the processes' /metrics for one counter only, which costs
them little CPU. The reference, measured in the same run, is the broker's own
consume rate: one plain aiokafka consumer reading every message without decoding
it. Goal: >= 200k records/s per process.

Checkpoints come every ``FLEETWATCH_CHECKPOINT_INTERVAL_SECONDS`` (2 s) of wall
time, so a loaded machine, processing the same records more slowly, checkpoints
more often per record. The aggregators count their checkpoint rounds and those
rounds' CPU time (``fleetwatch_checkpoint_rounds_total``,
``fleetwatch_checkpoint_cpu_seconds_total``): ``checkpoint_ms_per_round_*`` and
``records_per_cpu_s_*_without_checkpoints`` (the per-record cost alone) do not
change meaning with the load; ``checkpoints_*`` says how many rounds the total
paid for.

Every model has a reference's bin edges (100 quantile bins per numeric feature
and the score, as after a reference upload), so the aggregators count each
numeric column in them; the same 1-process run without edges is measured in
the same run for comparison (``*_without_edges``).

With a vector feature (``--embedding-dim``, default 384) the same 20 features
and one 384-d float32 embedding are measured in a second workload, 1 process
(``*_with_embedding``; goal >= 50,000 records/s per process).

    python benchmarks/ingest.py [--models 200] [--per-model 500] [--repeat 5] [--runs 3] [--embedding-dim 384]

Last line: JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import harness
import numpy as np
import redis
import workload
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from service.embedded import free_port
from service.kafka import ensure_topics
from service.profiles.control import FlushRequest
from service.profiles.keys import edges_key
from service.runtime.infrastructure import infrastructure
from service.settings import Settings
from sketches.bins import SCORE_EDGES, derive_edges, edge_set_to_bytes


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


async def produce_flushes(bootstrap: str, topic: str, models: list[str]) -> None:
    """One flush request per model, behind its records (:mod:`service.profiles.control`)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for m in models:
            key, value, headers = FlushRequest.now(m).encode()
            await producer.send_and_wait(topic, value, key=key, headers=headers)
    finally:
        await producer.stop()


#: Completion is polled on each process's /metrics, asking for the one counter only
#: (see :func:`harness.counter`): well under 1 % of an aggregator's CPU at this interval,
#: where the whole /metrics page every 50 ms cost it ~9 %.
POLL_SECONDS = 0.1


@dataclass
class Run:
    """One run of ``processes`` aggregators over the whole workload."""

    records_per_s: float  # all processes together, wall clock, to the last record aggregated
    cpu_s: list[float]  # per process, from its first record aggregated to every window stored
    records: list[int]  # per process, aggregated in that span
    wall_s: float
    checkpoints: list[int]  # per process, checkpoint rounds in that span
    checkpoint_cpu_s: list[float]  # per process, their CPU time

    @property
    def records_per_cpu_s(self) -> list[float | None]:
        return [round(r / c) if c > 0 else None for r, c in zip(self.records, self.cpu_s, strict=True)]

    @property
    def records_per_cpu_s_without_checkpoints(self) -> list[float | None]:
        return [round(r / (c - k)) if c > k else None
                for r, c, k in zip(self.records, self.cpu_s, self.checkpoint_cpu_s, strict=True)]

    @property
    def checkpoint_ms_per_round(self) -> list[float | None]:
        return [round(1e3 * k / n, 1) if n else None
                for n, k in zip(self.checkpoints, self.checkpoint_cpu_s, strict=True)]


def reference_edges(models: list[str]) -> dict[str, bytes]:
    """Per model, the stored edge set of a reference of 10,000 records of the workload's law."""
    recs = workload.records(1, 10_000, seed=1)
    columns = {k: np.array([r.features[k] for r in recs]) for k in workload.NUMERIC}
    columns[SCORE_EDGES] = np.array([r.score for r in recs])
    blob = edge_set_to_bytes({k: derive_edges(v) for k, v in columns.items()})
    return {edges_key(m): blob for m in models}


def _checkpoint_counters(port: int) -> tuple[float, float]:
    """(checkpoint rounds, their CPU seconds) of an aggregator so far."""
    return (harness.counter(port, "fleetwatch_checkpoint_rounds") or 0.0,
            harness.counter(port, "fleetwatch_checkpoint_cpu_seconds") or 0.0)


def aggregate_rate(s: Settings, processes: int, total: int, windows: int,
                   edges: dict[str, bytes] | None = None) -> Run:
    """Start ``processes`` aggregators in a fresh group and time the workload through them
    (with ``edges``: each model's reference bin edges stored first), until its ``total``
    records are aggregated and its ``windows`` windows are stored.

    Wall clock: from the first poll that sees records aggregated (counting only the records
    aggregated after it) to the midpoint between the last poll short of ``total`` and the
    first at ``total``. CPU: each process's user + system time, and its checkpoint rounds and
    their CPU time, from the first poll that sees it aggregate to the first poll that sees
    every window stored (idle between the two after it is done).
    """
    r = redis.Redis.from_url(s.redis_url)
    r.flushdb()
    if edges:
        r.mset(edges)
    env = {"FLEETWATCH_KAFKA_BOOTSTRAP": s.kafka_bootstrap, "FLEETWATCH_REDIS_URL": s.redis_url,
           "FLEETWATCH_PREDICTIONS_TOPIC": s.predictions_topic,
           "FLEETWATCH_AGGREGATOR_GROUP": f"bench-{uuid.uuid4().hex}",
           "FLEETWATCH_IDLE_CLOSE_SECONDS": "3600", "FLEETWATCH_CHECKPOINT_INTERVAL_SECONDS": "2"}
    ports = [free_port() for _ in range(processes)]
    procs = [harness.aggregator(env, p) for p in ports]
    try:
        t0 = done0 = t_before = end = None
        # per process: (cpu, records, checkpoint rounds, their cpu) at its first poll with records
        first: list[tuple[float, float, float, float] | None] = [None] * processes
        deadline = time.monotonic() + 900
        while True:
            before = time.perf_counter()
            each = [harness.counter(p, "fleetwatch_records_aggregated") or 0.0 for p in ports]
            stored = (sum(harness.counter(p, "fleetwatch_windows_closed") or 0.0 for p in ports)
                      if end is not None else 0.0)
            cpu = [harness.cpu_seconds(p.pid) for p in procs]
            now = (before + time.perf_counter()) / 2  # a busy process answers late
            done = sum(each)
            for i, n in enumerate(each):
                if n and first[i] is None:
                    first[i] = (cpu[i], n, *_checkpoint_counters(ports[i]))
            if done and t0 is None:
                t0, done0 = now, done
            if done >= total and end is None:
                end = now if t_before is None else (t_before + now) / 2
                if end <= t0:
                    raise SystemExit("workload done before the first poll: use a larger one")
            if end is not None and stored >= windows:
                last = [_checkpoint_counters(p) for p in ports]
                return Run(records_per_s=(total - done0) / (end - t0),
                           cpu_s=[c - f[0] if f else 0.0 for c, f in zip(cpu, first, strict=True)],
                           records=[int(n - f[1]) if f else 0 for n, f in zip(each, first, strict=True)],
                           wall_s=end - t0,
                           checkpoints=[int(k[0] - f[2]) if f else 0
                                        for k, f in zip(last, first, strict=True)],
                           checkpoint_cpu_s=[k[1] - f[3] if f else 0.0
                                             for k, f in zip(last, first, strict=True)])
            if t0 is not None and end is None:
                t_before = now
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise SystemExit("aggregators did not finish")
            time.sleep(POLL_SECONDS)
    finally:
        for p in procs:
            p.terminate()
            p.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--per-model", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5,
                    help="produce the workload this many times (encoded once): runs of a few "
                         "seconds, so that polling and CPU clock ticks do not dominate")
    ap.add_argument("--runs", type=int, default=3,
                    help="1-process runs with the reference's bins, interleaved with the other "
                         "runs; the figures are the median run's")
    ap.add_argument("--embedding-dim", type=int, default=384,
                    help="dimension of the vector feature of the second workload (0: none)")
    ap.add_argument("--embedding-per-model", type=int, default=100,
                    help="records per model of the workload with a vector feature")
    args = ap.parse_args()
    recs = workload.records(args.models, args.per_model)
    total = len(recs) * args.repeat
    per_message = 500
    with tempfile.TemporaryDirectory() as tmp:
        base = Settings(kafka_bootstrap=None, redis_url=None, data_dir=Path(tmp), topic_partitions=8,
                        embedded_broker_storage="memory")  # measures the aggregator, not the broker's disk
        with infrastructure(base) as s:
            asyncio.run(ensure_topics(s))
            messages = asyncio.run(workload.produce(s.kafka_bootstrap, s.predictions_topic, recs,
                                                    per_message, args.repeat))
            models = sorted({r.model_id for r in recs})
            asyncio.run(produce_flushes(s.kafka_bootstrap, s.predictions_topic, models))
            reference = asyncio.run(broker_consume_rate(s.kafka_bootstrap, s.predictions_topic,
                                                        messages, per_message))
            edges = reference_edges(models)
            windows = len(models)  # every record of a model in one window
            ones = [aggregate_rate(s, 1, total, windows, edges)]
            two = aggregate_rate(s, 2, total, windows, edges)
            plain = aggregate_rate(s, 1, total, windows)
            ones += [aggregate_rate(s, 1, total, windows, edges) for _ in range(args.runs - 1)]
            embedded = None
            if args.embedding_dim:
                emb = workload.records(args.models, args.embedding_per_model, seed=2,
                                       embedding_dim=args.embedding_dim)
                topic = s.predictions_topic + ".emb"
                asyncio.run(ensure_topics(s.model_copy(update={"predictions_topic": topic})))
                asyncio.run(workload.produce(s.kafka_bootstrap, topic, emb, per_message, args.repeat))
                asyncio.run(produce_flushes(s.kafka_bootstrap, topic, models))
                embedded = aggregate_rate(s.model_copy(update={"predictions_topic": topic}), 1,
                                          len(emb) * args.repeat, windows, edges)
    one = sorted(ones, key=lambda run: run.records_per_s)[(len(ones) - 1) // 2]
    result = {
        "records": total, "features": 20,
        "broker_consume_records_per_s": round(reference),
        "records_per_s_1_process": round(one.records_per_s),
        "records_per_s_1_process_runs": [round(run.records_per_s) for run in ones],
        "records_per_cpu_s_1_process_runs": [run.records_per_cpu_s[0] for run in ones],
        "records_per_s_2_processes_total": round(two.records_per_s),
        "records_per_s_2_processes_per_process": round(two.records_per_s / 2),
        "ratio_1_process_to_broker": round(one.records_per_s / reference, 3),
        "goal_records_per_s_per_process": 200_000,
        # CPU of each aggregator process over its run (wall-clock rates on a shared
        # machine depend on what else runs; records per CPU-second much less so)
        "cpu_s_1_process": round(one.cpu_s[0], 2),
        "records_per_cpu_s_1_process": one.records_per_cpu_s[0],
        "cpu_s_2_processes": [round(c, 2) for c in two.cpu_s],
        "records_2_processes": two.records,
        "records_per_cpu_s_2_processes": two.records_per_cpu_s,
        # checkpoints come every 2 s of wall time: their count per record grows with the load,
        # their cost per round and the per-record cost without them do not
        "checkpoints_1_process": one.checkpoints[0],
        "checkpoint_ms_per_round_1_process": one.checkpoint_ms_per_round[0],
        "records_per_cpu_s_1_process_without_checkpoints": one.records_per_cpu_s_without_checkpoints[0],
        "checkpoints_2_processes": two.checkpoints,
        "checkpoint_ms_per_round_2_processes": two.checkpoint_ms_per_round,
        "records_per_cpu_s_2_processes_without_checkpoints": two.records_per_cpu_s_without_checkpoints,
        "wall_s_1_process": round(one.wall_s, 3),
        "wall_s_2_processes": round(two.wall_s, 3),
        "records_per_s_1_process_without_edges": round(plain.records_per_s),
        "records_per_cpu_s_1_process_without_edges": plain.records_per_cpu_s[0],
    }
    if embedded is not None:
        result |= {"embedding_dim": args.embedding_dim,
                   "records_per_s_1_process_with_embedding": round(embedded.records_per_s),
                   "records_per_cpu_s_1_process_with_embedding": embedded.records_per_cpu_s[0],
                   "goal_records_per_s_per_process_with_embedding": 50_000}
        print(f"with a {args.embedding_dim}-d embedding: {embedded.records_per_s:,.0f} records/s, "
              f"{embedded.records_per_cpu_s[0]:,} per CPU-second (1 process)")
    print(f"aggregator: {one.records_per_s:,.0f} records/s (1 process, the median of "
          f"{', '.join(f'{run.records_per_s:,.0f}' for run in ones)}), "
          f"{two.records_per_s:,.0f} records/s (2 processes); "
          f"broker consume reference {reference:,.0f} records/s; per CPU-second: "
          f"{one.records_per_cpu_s[0]:,} (1 process), {two.records_per_cpu_s} (2 processes); "
          f"1 process: {one.checkpoints[0]} checkpoint rounds of {one.checkpoint_ms_per_round[0]} ms CPU, "
          f"{one.records_per_cpu_s_without_checkpoints[0]:,} records per CPU-second without them; "
          f"without edges: {plain.records_per_s:,.0f} records/s, "
          f"{plain.records_per_cpu_s[0]:,} per CPU-second")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
