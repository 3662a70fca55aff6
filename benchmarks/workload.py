"""The benchmark workload: prediction records with 20 features (10 numeric,
10 categorical with 1,000 distinct values each), produced to a real broker."""

from __future__ import annotations

import asyncio

import numpy as np
from aiokafka import AIOKafkaProducer

from sdk.record import PredictionRecord
from sdk.wire import encode_batch

NUMERIC = [f"num_{i}" for i in range(10)]
CATEGORICAL = [f"cat_{i}" for i in range(10)]
CATEGORIES = np.array([f"v{i}" for i in range(1_000)])


def records(n_models: int, per_model: int, t0: float = 1_700_000_100.0, seed: int = 0,
            window_seconds: int = 300, embedding_dim: int = 0,
            id_prefix: str = "p") -> list[PredictionRecord]:
    """``per_model`` records for each of ``n_models`` models, inside one window (prediction
    ids ``{id_prefix}{i}``); with ``embedding_dim``, also a vector feature ``embedding``
    (float32 standard normals)."""
    rng = np.random.default_rng(seed)
    n = n_models * per_model
    nums = rng.normal(size=(n, len(NUMERIC))).tolist()
    cats = CATEGORIES[rng.zipf(1.3, size=(n, len(CATEGORICAL))) % len(CATEGORIES)].tolist()
    t = (t0 + rng.uniform(0, window_seconds - 1, n)).tolist()
    scores = rng.uniform(size=n).tolist()
    vectors = rng.standard_normal((n, embedding_dim), dtype=np.float32) if embedding_dim else None
    out = []
    for i in range(n):
        features = dict(zip(NUMERIC, nums[i], strict=True))
        features.update(zip(CATEGORICAL, cats[i], strict=True))
        if vectors is not None:
            features["embedding"] = vectors[i]
        out.append(PredictionRecord(f"model-{i % n_models}", "1", f"{id_prefix}{i}", t[i], features,
                                    score=scores[i]))
    return out


async def produce(bootstrap: str, topic: str, recs: list[PredictionRecord], batch: int = 500,
                  repeat: int = 1) -> int:
    """Produce records in per-model batches (acks=all), the whole set ``repeat`` times (each
    batch encoded once); returns the number of messages."""
    by_model: dict[str, list[PredictionRecord]] = {}
    for r in recs:
        by_model.setdefault(r.model_id, []).append(r)
    messages = [(model.encode(), encode_batch(rs[i:i + batch]))
                for model, rs in by_model.items() for i in range(0, len(rs), batch)]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20,
                                max_batch_size=1_048_576)
    await producer.start()
    try:
        futures = []
        for _ in range(repeat):
            for key, value in messages:
                futures.append(await producer.send(topic, value, key=key))
        await asyncio.gather(*futures)
        return len(futures)
    finally:
        await producer.stop()
