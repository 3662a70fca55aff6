"""What a record costs the aggregator, stage by stage, in one process without a broker or Redis.

The workload of `benchmarks/ingest.py` (the same records, messages and reference bin edges:
200 models x 500 records produced 5 times, each model's records in one window, 500 records
per message) goes through the aggregator's own steps, each timed in CPU time
(``time.process_time``):

decode
    ``decode_batch`` of each message (MessagePack and validation: :mod:`sdk.wire`).
profile
    ``WindowProfile.add_columns`` into the model's open window, counted in its reference's
    bins (:mod:`sketches.profile`).
checkpoint
    ``to_bytes(fast=True)`` of every window touched since the last checkpoint, once per
    400,000 records: what an aggregator at the goal rate (200,000 records/s) pays at its
    checkpoint interval of 2 s (:mod:`service.profiles.partition`).
close
    ``to_bytes()`` of every window at the end (t-digests compressed, Zstandard level 3).

The process runs as an aggregator does: its garbage-collector thresholds raised
(``GC_THRESHOLDS``) and the sketches' compiled loops loaded (:func:`sketches.kernels.load`)
before the first record. The reference, measured in the same run, is MessagePack alone:
``msgpack.unpackb`` of the same messages, the least any decoding costs. Unlike the
broker-to-Redis benchmark this leaves out Kafka, Redis and the event loop, so it is steadier on a shared
machine and says which stage a change moved (the records the messages were encoded from are
released before, as an aggregator holds none: alive, their half-million objects made the
garbage collector's full passes about a quarter of the time measured); the goal of 200,000
records/s per process leaves 5 us per record for everything.

    python benchmarks/ingest_stages.py [--models 200] [--per-model 500] [--repeat 5]

Last line: JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import msgpack
import workload
from ingest import reference_edges

from sdk.wire import decode_batch, encode_batch
from service.profiles.aggregator import GC_THRESHOLDS
from service.profiles.keys import edges_key
from sketches import kernels
from sketches.bins import bin_templates, edge_set_from_bytes
from sketches.profile import WindowProfile

CHECKPOINT_RECORDS = 400_000
"""Records between checkpoints: the goal rate (200,000 records/s) times the 2 s interval."""
PER_MESSAGE = 500


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--per-model", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    recs = workload.records(args.models, args.per_model)
    by_model: dict[str, list] = {}
    for r in recs:
        by_model.setdefault(r.model_id, []).append(r)
    messages = [encode_batch(rs[i:i + PER_MESSAGE]) for rs in by_model.values()
                for i in range(0, len(rs), PER_MESSAGE)] * args.repeat
    blobs = reference_edges(list(by_model))
    edges = {m: bin_templates(edge_set_from_bytes(blobs[edges_key(m)])) for m in by_model}
    del recs, by_model  # an aggregator holds no records: their objects would slow every collection
    gc.collect()
    gc.set_threshold(*GC_THRESHOLDS)  # as an aggregator does when it starts, and:
    kernels.load()

    t0 = time.process_time()
    for value in messages:
        msgpack.unpackb(value)
    reference = time.process_time() - t0

    cpu = dict.fromkeys(("decode", "profile", "checkpoint", "close"), 0.0)
    windows: dict[str, WindowProfile] = {}
    dirty: set[str] = set()
    since = records = 0
    for value in messages:
        t0 = time.process_time()
        batch = decode_batch(value)
        t1 = time.process_time()
        profile = windows.get(batch.model_id)
        if profile is None:
            profile = windows[batch.model_id] = WindowProfile(batch.model_id, 0, 300,
                                                              bins=edges[batch.model_id])
        profile.add_columns(batch.columns)
        t2 = time.process_time()
        cpu["decode"] += t1 - t0
        cpu["profile"] += t2 - t1
        dirty.add(batch.model_id)
        n = len(batch.columns)
        records += n
        since += n
        if since >= CHECKPOINT_RECORDS:
            t0 = time.process_time()
            for m in dirty:
                windows[m].to_bytes(fast=True)
            cpu["checkpoint"] += time.process_time() - t0
            dirty.clear()
            since = 0
    t0 = time.process_time()
    stored = [p.to_bytes() for p in windows.values()]
    cpu["close"] = time.process_time() - t0

    us = {stage: round(1e6 * s / records, 2) for stage, s in cpu.items()}
    total = sum(cpu.values())
    result = {
        "records": records, "windows": len(windows), "records_per_window": records // len(windows),
        **{f"us_per_record_{stage}": v for stage, v in us.items()},
        "us_per_record_total": round(1e6 * total / records, 2),
        "records_per_cpu_s": round(records / total),
        "us_per_record_msgpack_reference": round(1e6 * reference / records, 2),
        "ratio_decode_to_msgpack": round(cpu["decode"] / reference, 2),
        "stored_bytes_per_window": sum(map(len, stored)) // len(stored),
        "goal_records_per_cpu_s": 200_000,
    }
    print("us per record: " + ", ".join(f"{k} {v}" for k, v in us.items())
          + f"; total {result['us_per_record_total']} ({result['records_per_cpu_s']:,} records per "
          f"CPU-second; MessagePack alone {result['us_per_record_msgpack_reference']})")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
