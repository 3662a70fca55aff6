"""The example model servers, run as processes against the real broker: every
prediction and label they log arrives on Kafka and decodes under the contract.

The servers run with a 60 s linger, so nothing is sent before the test stops
them with SIGTERM: what arrives was delivered by the shutdown flush (uvicorn's
lifespan for the FastAPI server, ``flush_on_signals`` for the WSGI server).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaConsumer
from sklearn.datasets import load_breast_cancer, load_iris

from sdk.labels import decode_labels
from sdk.wire import decode_batch
from service.embedded import free_port, wait_for_port

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
N = 30
N_LABELS = 10


def dataset_rows(load: Callable) -> tuple[list[dict[str, float]], list]:
    data = load()
    names = [str(n) for n in data.feature_names]
    rows = [dict(zip(names, map(float, x), strict=True)) for x in data.data[:: len(data.data) // N][:N]]
    return rows, [data.target_names[t] for t in data.target[:: len(data.data) // N][:N]]


async def consume(bootstrap: str, topic: str, decode: Callable, expected: int) -> list:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                group_id=None)
    await consumer.start()
    batches: list = []
    try:
        async with asyncio.timeout(30):
            while sum(len(b.columns) for b in batches) < expected:
                for messages in (await consumer.getmany(timeout_ms=500)).values():
                    batches += [decode(m.value) for m in messages]
    finally:
        await consumer.stop()
    assert all(b.errors == [] for b in batches)
    return batches


async def run_example(example: str, settings, labels_topic: str, log: Path, rows: list,
                      label_of: Callable[[int], object]) -> list[dict]:
    """Start the example, send N predictions and N_LABELS labels, stop it with SIGTERM."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(EXAMPLES / example), "--port", str(port), "--bootstrap",
             settings.kafka_bootstrap, "--topic", settings.predictions_topic, "--labels-topic",
             labels_topic, "--linger-ms", "60000"], stdout=out, stderr=subprocess.STDOUT)
    try:
        await asyncio.to_thread(wait_for_port, port, 60)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            answers = []
            for i, features in enumerate(rows):
                resp = await http.post("/predict", json={"features": features, "prediction_id": f"req-{i}"})
                assert resp.status_code == 200, resp.text
                answers.append(resp.json())
            for i in range(N_LABELS):
                resp = await http.post("/label", json={"prediction_id": f"req-{i}", "label": label_of(i)})
                assert resp.status_code == 200, resp.text
            stats = (await http.get("/stats")).json()
            assert stats["accepted"] == N and stats["labels"]["accepted"] == N_LABELS
            assert stats["sent"] == 0  # held back by the linger: only the shutdown flush sends
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 30)
    return answers


async def test_fastapi_example_delivers_scores_and_labels(settings, tmp_path):
    rows, targets = dataset_rows(load_breast_cancer)
    labels_topic = f"labels-{uuid.uuid4().hex[:8]}"
    answers = await run_example("fastapi_server.py", settings, labels_topic, tmp_path / "server.log",
                                rows, lambda i: targets[i] == "malignant")
    batches = await consume(settings.kafka_bootstrap, settings.predictions_topic, decode_batch, N)
    assert {b.model_id for b in batches} == {"breast-cancer"}
    records = {r.prediction_id: r for b in batches for r in b.records}
    assert sorted(records) == sorted(f"req-{i}" for i in range(N))
    for i, answer in enumerate(answers):
        r = records[f"req-{i}"]
        assert r.score == answer["score"] and r.predicted_label == answer["malignant"]
        assert r.features == rows[i] and r.latency_ms > 0
    labels = await consume(settings.kafka_bootstrap, labels_topic, decode_labels, N_LABELS)
    got = {p: v for b in labels for p, v in zip(b.columns.prediction_id, b.columns.label, strict=True)}
    assert got == {f"req-{i}": targets[i] == "malignant" for i in range(N_LABELS)}


async def test_wsgi_example_delivers_class_probabilities_and_labels_on_sigterm(settings, tmp_path):
    rows, targets = dataset_rows(load_iris)
    labels_topic = f"labels-{uuid.uuid4().hex[:8]}"
    answers = await run_example("wsgi_server.py", settings, labels_topic, tmp_path / "server.log",
                                rows, lambda i: str(targets[i]))
    batches = await consume(settings.kafka_bootstrap, settings.predictions_topic, decode_batch, N)
    records = {r.prediction_id: r for b in batches for r in b.records}
    assert sorted(records) == sorted(f"req-{i}" for i in range(N))
    for i, answer in enumerate(answers):
        r = records[f"req-{i}"]
        assert r.class_probabilities == pytest.approx(answer["probabilities"])
        assert r.predicted_label == answer["species"] and r.features == rows[i]
    labels = await consume(settings.kafka_bootstrap, labels_topic, decode_labels, N_LABELS)
    got = {p: v for b in labels for p, v in zip(b.columns.prediction_id, b.columns.label, strict=True)}
    assert got == {f"req-{i}": str(targets[i]) for i in range(N_LABELS)}
