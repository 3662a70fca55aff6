"""The clients against a real Kafka-protocol broker: delivery of rows, columns
and labels; a broker that is down at start or killed mid-run; fork, signal
handlers and interpreter exit (in child processes)."""

from __future__ import annotations

import asyncio
import collections
import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from aiokafka import AIOKafkaConsumer

from sdk import AsyncClient, Client
from sdk.labels import decode_labels
from sdk.wire import decode_batch
from sdk.worker import MAX_NESTED_CALLS
from service.embedded import free_port, kafka_broker

T0 = 1_700_000_000.0


async def consume(bootstrap: str, topic: str, decode: Callable, expected: int, timeout: float = 30) -> list:
    """Decoded messages of ``topic`` until ``expected`` records arrived."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    batches: list = []
    try:
        async with asyncio.timeout(timeout):
            while sum(len(b.columns) for b in batches) < expected:
                for messages in (await consumer.getmany(timeout_ms=200)).values():
                    batches += [decode(m.value) for m in messages]
    finally:
        await consumer.stop()
    return batches


def prediction_ids(batches: list) -> list[str]:
    return [p for b in batches for p in b.columns.prediction_id]


def topics() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"pred-{tag}", f"labels-{tag}"


async def test_client_delivers_rows_columns_and_labels(kafka_bootstrap):
    topic, labels_topic = topics()
    with Client(kafka_bootstrap, topic, labels_topic=labels_topic, linger_ms=10) as fw:
        for i in range(200):
            assert fw.log_prediction("rows", {"x": float(i), "c": "abc"[i % 3]}, model_version="2",
                                     prediction_id=f"r{i}", event_time=T0 + i, score=i / 200)
        frame = pd.DataFrame({"x": np.arange(1500.0), "flag": np.arange(1500) % 2 == 0})
        assert fw.log_predictions("cols", frame, prediction_ids=[f"c{i}" for i in range(1500)],
                                  event_times=np.full(1500, T0), scores=np.linspace(0, 1, 1500)) == 1500
        for i in range(0, 200, 2):
            assert fw.log_label("rows", f"r{i}", i % 4 == 0, event_time=T0 + 3600)
        assert await asyncio.to_thread(fw.flush, 30)
        stats = fw.stats
    assert (stats.sent, stats.dropped, stats.labels.sent) == (1700, 0, 100)
    batches = await consume(kafka_bootstrap, topic, decode_batch, 1700)
    by_model = collections.defaultdict(list)
    for b in batches:
        assert b.errors == []
        by_model[b.model_id] += b.records
    assert [r.prediction_id for r in by_model["rows"]] == [f"r{i}" for i in range(200)]
    r7 = by_model["rows"][7]
    assert (r7.features, r7.model_version, r7.event_time) == ({"x": 7.0, "c": "b"}, "2", T0 + 7)
    assert r7.score == 0.035
    cols = by_model["cols"]
    assert [r.prediction_id for r in cols] == [f"c{i}" for i in range(1500)]
    assert cols[3].features == {"x": 3.0, "flag": False} and cols[3].score == np.linspace(0, 1, 1500)[3]
    labels = await consume(kafka_bootstrap, labels_topic, decode_labels, 100)
    got = {p: v for b in labels for p, v in zip(b.columns.prediction_id, b.columns.label, strict=True)}
    assert got == {f"r{i}": i % 4 == 0 for i in range(0, 200, 2)}


async def test_async_client_has_the_same_api(kafka_bootstrap):
    topic, labels_topic = topics()
    async with AsyncClient(kafka_bootstrap, topic, labels_topic=labels_topic, linger_ms=10) as fw:
        fw.log_prediction("a", {"x": 1.0}, prediction_id="a1")
        fw.log_predictions("a", {"x": [2.0, 3.0]}, prediction_ids=["a2", "a3"])
        fw.log_label("a", "a1", "yes")
        assert await fw.flush()
    assert (fw.stats.sent, fw.stats.labels.sent) == (3, 1)
    assert prediction_ids(await consume(kafka_bootstrap, topic, decode_batch, 3)) == ["a1", "a2", "a3"]


@pytest.mark.integration
async def test_a_broker_down_at_start_is_waited_for_and_then_delivered_to(tmp_path):
    port = free_port()
    topic, _ = topics()
    fw = Client(f"127.0.0.1:{port}", topic, linger_ms=10)
    fw.start()  # returns at once: the worker retries the connection in the background
    for i in range(50):
        fw.log_prediction("late-broker", {"x": float(i)}, prediction_id=f"p{i}")
    assert await asyncio.to_thread(fw.flush, 0.3) is False
    assert (fw.stats.buffered, fw.stats.sent) == (50, 0)
    broker = kafka_broker(tmp_path, port=port)
    await asyncio.to_thread(broker.start)
    try:
        assert await asyncio.to_thread(fw.flush, 30)
        assert fw.stats.sent == 50
        batches = await consume(f"127.0.0.1:{port}", topic, decode_batch, 50)
        assert prediction_ids(batches) == [f"p{i}" for i in range(50)]
    finally:
        await asyncio.to_thread(fw.close, 5)
        broker.stop()


@pytest.mark.integration
async def test_a_broker_killed_mid_run_costs_records_counted_by_reason_never_an_exception(tmp_path):
    broker = kafka_broker(tmp_path)
    await asyncio.to_thread(broker.start)
    topic, _ = topics()
    fw = Client(f"127.0.0.1:{broker.port}", topic, linger_ms=10, max_buffer=100, delivery_timeout_ms=1_000)
    fw.start()
    for i in range(50):
        fw.log_prediction("m", {"x": float(i)})
    assert await asyncio.to_thread(fw.flush, 30)
    broker.kill()
    logged = 2_000
    results = [fw.log_prediction("m", {"x": float(i)}) for i in range(logged)]
    await asyncio.to_thread(fw.close, 2)
    s = fw.stats
    assert s.sent == 50 and s.buffered == 0
    assert results.count(False) == s.dropped_buffer_full > 0
    assert s.accepted == 50 + results.count(True) == s.sent + s.dropped_send_failed + s.dropped_closed
    assert s.accepted + s.dropped_buffer_full == 50 + logged


def run_child(code: str, timeout: float = 90) -> dict:
    """Run Python ``code`` in a child process; its last output line is JSON."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


async def test_a_forked_child_restarts_the_worker_and_the_parent_flushes_at_exit(kafka_bootstrap):
    topic, _ = topics()
    result = await asyncio.to_thread(run_child, f"""
        import json, os
        from sdk import Client
        fw = Client({kafka_bootstrap!r}, {topic!r}, linger_ms=60_000)
        fw.start()
        fw.log_prediction("fork", {{"x": 0.0}}, prediction_id="parent-before")
        assert fw.flush(30)
        fw.log_prediction("fork", {{"x": 1.0}}, prediction_id="parent-buffered")  # the parent's to send
        pid = os.fork()
        if pid == 0:
            for i in range(20):
                fw.log_prediction("fork", {{"x": 2.0}}, prediction_id=f"child-{{i}}")
            fw.log_prediction("fork", {{"x": 3.0}})  # an id made by the child's worker
            ok = fw.flush(30) and fw.stats.sent == 21 and fw.stats.accepted == 21
            os._exit(0 if ok else 1)
        child = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        fw.log_prediction("fork", {{"x": 4.0}})  # an id made by the parent's worker
        print(json.dumps({{"child_exit": child}}))
        # no flush, no close: interpreter exit delivers what is buffered
    """)
    assert result == {"child_exit": 0}
    ids = prediction_ids(await consume(kafka_bootstrap, topic, decode_batch, 24))
    named = [p for p in ids if p.startswith(("parent", "child"))]
    generated = [p for p in ids if p not in named]
    assert sorted(named) == sorted(["parent-before", "parent-buffered"] + [f"child-{i}" for i in range(20)])
    assert len(ids) == 24 and len(set(generated)) == 2  # nothing twice; the processes' ids differ


async def test_flushing_from_a_signal_handler_while_logging_never_deadlocks(kafka_bootstrap):
    topic, _ = topics()
    result = await asyncio.to_thread(run_child, f"""
        import json, signal
        from sdk import Client
        fw = Client({kafka_bootstrap!r}, {topic!r}, linger_ms=60_000)
        fw.start()
        flushes, depth = [], [0]
        # A flush waits for the worker; signals keep arriving meanwhile and nest further
        # flushes inside it, so on a loaded machine the outermost one needs a generous timeout.
        def handler(signum, frame):
            depth[0] += 1
            try:
                flushes.append((depth[0], fw.flush(90)))
            finally:
                depth[0] -= 1
        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, 0.005, 0.005)  # interrupts log_prediction at random points
        for i in range(100_000):
            fw.log_prediction("sig", {{"x": float(i)}}, prediction_id=f"s{{i}}")
        signal.setitimer(signal.ITIMER_REAL, 0)
        ok = fw.flush(30)
        print(json.dumps({{"flushes": flushes, "ok": ok, "sent": fw.stats.sent}}))
    """, timeout=240)
    assert result["flushes"] and result["ok"] and result["sent"] == 100_000
    # every flush nested less deep than the bound delivered; deeper ones gave up at once
    assert all(ok == (depth <= MAX_NESTED_CALLS) for depth, ok in result["flushes"])
