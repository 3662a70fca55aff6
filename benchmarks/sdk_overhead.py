"""Per-call overhead of ``Client.log_prediction`` with 20 features, and with a 384-dimensional
embedding (a float32 numpy array, :mod:`sdk.vectors`) besides them.

Measures each call with ``time.perf_counter_ns`` over many calls, the SDK call
interleaved with a reference in the same run: a plain function call that does
the dict work a naive logger does (build the record dict from the same
arguments). The client is started against a real Kafka-protocol broker (an
embedded Tansu child process), so its worker thread is batching, encoding,
compressing and producing during the measurement, competing for the GIL as
it would in a model server. The garbage collector is disabled during the
timed loop (both functions alike) so that collection pauses of the whole
process are not charged to whichever call happens to trigger them.

Run::

    .venv/bin/python benchmarks/sdk_overhead.py [--calls 200000]

The last line is JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from sdk import Client
from service.embedded import kafka_broker

N_FEATURES = 20
EMBEDDING_DIM = 384
GOAL_P50_US = 5.0
GOAL_P99_US = 20.0


def plain_record(model_id, features, *, model_version="0", prediction_id=None, event_time=None,
                 score=None, class_probabilities=None, predicted_label=None, slices=None,
                 latency_ms=None):
    """The reference: the dict a naive logger builds per call."""
    return {"model_id": model_id, "model_version": model_version, "prediction_id": prediction_id,
            "event_time": event_time, "features": features, "score": score,
            "class_probabilities": class_probabilities, "predicted_label": predicted_label,
            "slices": slices, "latency_ms": latency_ms}


def percentile(sorted_ns: list[int], q: float) -> float:
    """The q-quantile in microseconds (nearest rank)."""
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1000.0


def measure(client: Client, calls: int, embedding: bool = False) -> tuple[list[int], list[int]]:
    """Per-call nanoseconds of the SDK and of the reference, interleaved call by call; with
    ``embedding``, each call also carries a new 384-d float32 vector (one of 1,000 made
    beforehand, as a model server hands over the array its encoder just returned)."""
    features = {f"f{i}": float(i) * 0.5 if i % 4 else f"cat{i}" for i in range(N_FEATURES)}
    vectors = (list(np.random.default_rng(0).standard_normal((1_000, EMBEDDING_DIM), np.float32))
               if embedding else None)
    sdk_ns = [0] * calls
    plain_ns = [0] * calls
    clock = time.perf_counter_ns
    log = client.log_prediction
    gc.disable()
    try:
        for i in range(calls):
            pid = f"p{i}"
            if vectors is not None:
                features["embedding"] = vectors[i % 1_000]
            t0 = clock()
            plain_record("bench", features, model_version="1", prediction_id=pid, score=0.25)
            t1 = clock()
            log("bench", features, model_version="1", prediction_id=pid, score=0.25)
            t2 = clock()
            plain_ns[i] = t1 - t0
            sdk_ns[i] = t2 - t1
    finally:
        gc.enable()
    return sorted(sdk_ns), sorted(plain_ns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    args = parser.parse_args()
    broker = kafka_broker(Path(tempfile.mkdtemp(prefix="fw-bench-")))
    broker.start()
    try:
        with Client(f"127.0.0.1:{broker.port}", "bench.predictions", max_buffer=args.calls) as client:
            measure(client, 10_000)  # warm-up (and the producer connects)
            client.flush(30)
            sdk_ns, plain_ns = measure(client, args.calls)
            client.flush(60)
            measure(client, 10_000, embedding=True)
            client.flush(30)
            emb_ns, emb_plain_ns = measure(client, args.calls, embedding=True)
            client.flush(60)
            stats = client.stats
    finally:
        broker.stop()
    result = {
        "features": N_FEATURES,
        "calls": args.calls,
        "sdk_p50_us": percentile(sdk_ns, 0.50),
        "sdk_p99_us": percentile(sdk_ns, 0.99),
        "sdk_p999_us": percentile(sdk_ns, 0.999),
        "sdk_mean_us": round(statistics.fmean(sdk_ns) / 1000.0, 3),
        "plain_p50_us": percentile(plain_ns, 0.50),
        "plain_p99_us": percentile(plain_ns, 0.99),
        "plain_p999_us": percentile(plain_ns, 0.999),
        "plain_mean_us": round(statistics.fmean(plain_ns) / 1000.0, 3),
        "p50_ratio": round(percentile(sdk_ns, 0.50) / percentile(plain_ns, 0.50), 2),
        "p99_ratio": round(percentile(sdk_ns, 0.99) / percentile(plain_ns, 0.99), 2),
        "goal_p50_us": GOAL_P50_US,
        "goal_p99_us": GOAL_P99_US,
        "embedding_dim": EMBEDDING_DIM,
        "embedding_sdk_p50_us": percentile(emb_ns, 0.50),
        "embedding_sdk_p99_us": percentile(emb_ns, 0.99),
        "embedding_sdk_p999_us": percentile(emb_ns, 0.999),
        "embedding_plain_p99_us": percentile(emb_plain_ns, 0.99),
        "embedding_p99_ratio": round(percentile(emb_ns, 0.99) / percentile(emb_plain_ns, 0.99), 2),
        "records_sent": stats.sent,
        "vectors_dropped": stats.vectors_dropped_invalid,
        "records_dropped": stats.dropped_by_reason(),
    }
    print(f"log_prediction ({N_FEATURES} features): p50 {result['sdk_p50_us']:.2f} us, "
          f"p99 {result['sdk_p99_us']:.2f} us; plain dict call: p50 {result['plain_p50_us']:.2f} us, "
          f"p99 {result['plain_p99_us']:.2f} us")
    print(f"with a {EMBEDDING_DIM}-d embedding: p50 {result['embedding_sdk_p50_us']:.2f} us, "
          f"p99 {result['embedding_sdk_p99_us']:.2f} us")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
