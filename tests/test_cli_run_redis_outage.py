"""A 30 s Redis outage under ``fleetwatch run`` with all five roles: every role waits it
out (one policy, ``service.runtime.outage``), the process keeps running, and once Redis is
back every role resumes and nothing is lost: every prediction sent before, during and after
the outage is aggregated once, every window evaluated, every label joined once, and the
alert the shifted windows raise is paged."""

from __future__ import annotations

import asyncio
import math
import signal
import subprocess
import sys
import time
import uuid

import httpx
import numpy as np
import pytest

from sdk.client import Client
from service.cohorts.store import CohortStore
from service.embedded import free_port, redis_server
from service.profiles.keys import window_member
from service.profiles.store import Store
from service.runtime.roles import ROLES
from service.settings import environment
from tests.conftest import wait_for
from tests.roles import window_counts
from tests.sink import Sink
from tests.test_cli_run_restart import wait_up

OUTAGE_SECONDS = 30
MODEL = "fraud"
WINDOW = 60
PER_WINDOW = 400
WORKERS = [name for name in ROLES if name != "api"]  # the API answers 503 meanwhile (tested elsewhere)


def rows(rng: np.random.Generator, n: int, shift: float = 0.0) -> list[dict]:
    return [{"income": float(rng.lognormal(10 + shift, 0.5)), "age": float(rng.normal(40, 10))}
            for _ in range(n)]


def send(env: dict[str, str], start: int, window: int, rng: np.random.Generator, shift: float,
         labels: list[str]) -> list[str]:
    """One window of predictions (ids ``w<window>-<i>``) and the labels of ``labels``; the
    ids sent."""
    ids = [f"w{window}-{i}" for i in range(PER_WINDOW)]
    with Client.from_env(env) as fw:
        for i, (pid, features) in enumerate(zip(ids, rows(rng, PER_WINDOW, shift), strict=True)):
            fw.log_prediction(MODEL, features, model_version="1", prediction_id=pid,
                              event_time=start + window * WINDOW + i * WINDOW / PER_WINDOW,
                              score=float(rng.uniform()))
        assert fw.flush(30)
    assert fw.stats.dropped == 0
    send_labels(env, labels, rng)
    return ids


def send_labels(env: dict[str, str], ids: list[str], rng: np.random.Generator) -> list[str]:
    with Client.from_env(env) as fw:
        for pid in ids:
            fw.log_label(MODEL, pid, int(rng.uniform() < 0.5))
        assert fw.flush(30)
    return ids


def logged(log_path, text: str) -> set[str]:
    """The worker roles whose log lines contain ``<text> role=<role>``."""
    out = log_path.read_text(errors="replace")
    return {r for r in WORKERS if f"{text} role={r} " in out}


@pytest.mark.timeout(400)
async def test_every_role_of_fleetwatch_run_resumes_after_a_30_s_redis_outage(settings, tmp_path):
    redis = redis_server(tmp_path / "redis")
    redis.start()
    tag = uuid.uuid4().hex[:8]
    api_port = free_port()
    settings = settings.model_copy(update={
        "redis_url": f"redis://127.0.0.1:{redis.port}/0", "redis_cluster": False, "api_port": api_port,
        "labels_topic": f"lab-{tag}", "joiner_group": f"join-{tag}", "notifier_group": f"not-{tag}",
        "receiver_allow_nets": ["127.0.0.0/8"], "checkpoint_interval_seconds": 0.3,
        "idle_close_seconds": 3600.0, "performance_eval_interval_seconds": 1.0,
        "redis_retry_max_seconds": 1.0, "data_dir": tmp_path / "data",
    })
    env = environment(settings)
    rng = np.random.default_rng(7)
    start = (math.floor(time.time()) // WINDOW - 10) * WINDOW  # four windows, all in the past
    log_path = tmp_path / "run.log"
    store = Store(settings.redis_url)
    sink = Sink()
    sent: list[str] = []
    labelled: list[str] = []
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "service.cli", "run", "-v"], env=env,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        async with sink.serving(), httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}",
                                                     timeout=30) as http:
            await asyncio.to_thread(wait_up, proc, api_port)
            put = await http.put(f"/v1/models/{MODEL}", json={
                "window_seconds": WINDOW, "tier": 1, "performance": {"task": "binary"}})
            assert put.status_code == 200, put.text
            ref = await http.post(f"/v1/models/{MODEL}/reference", json={"rows": rows(rng, 2000)})
            assert ref.status_code == 200, ref.text
            hook = await http.post("/v1/receivers", json={
                "name": "on-call", "kind": "webhook", "url": sink.url, "secret": "s" * 32,
                "group_wait_seconds": 0.2, "group_interval_seconds": 0.2, "repeat_interval_seconds": 3600})
            assert hook.status_code == 201, hook.text

            # Before: a healthy window, closed by a flush and evaluated.
            sent += await asyncio.to_thread(send, env, start, 0, rng, 0.0, [])
            assert (await http.post(f"/v1/models/{MODEL}/flush")).status_code == 202
            await wait_for(lambda: _evaluated(store, [window_member(WINDOW, start, "1")]), timeout=60)

            # The outage: every worker role meets it; traffic keeps coming (into Kafka): a
            # healthy window and a shifted one, and the labels of the windows before them.
            redis.stop()
            down_at = time.monotonic()
            assert (await http.get("/v1/models")).status_code == 503
            for window, shift in ((1, 0.0), (2, 1.0)):
                labels = sent[-PER_WINDOW:]
                sent += await asyncio.to_thread(send, env, start, window, rng, shift, labels)
                labelled += labels
            await asyncio.sleep(OUTAGE_SECONDS - (time.monotonic() - down_at))  # the outage's length
            assert proc.poll() is None, "fleetwatch run ended during the outage"
            assert logged(log_path, "redis unavailable") == set(WORKERS)  # each met it
            redis.start()

            # After: a last shifted window and the remaining labels; a flush closes what is open.
            labels = sent[-PER_WINDOW:]
            sent += await asyncio.to_thread(send, env, start, 3, rng, 1.0, labels)
            labelled += labels + await asyncio.to_thread(send_labels, env, sent[-PER_WINDOW:], rng)
            await wait_for(lambda: _logged(log_path, "redis back"), timeout=60)
            flushed = await http.post(f"/v1/models/{MODEL}/flush")
            assert flushed.status_code == 202, flushed.text

            members = [window_member(WINDOW, start + k * WINDOW, "1") for k in range(4)]

            async def all_aggregated() -> bool:
                counts = await window_counts(store, MODEL)
                assert sum(counts.values()) <= len(sent), f"{counts}: counted twice"
                return counts == {start + k * WINDOW: PER_WINDOW for k in range(4)}

            await wait_for(all_aggregated, timeout=120)
            await wait_for(lambda: _evaluated(store, members), timeout=120)
            cohorts = CohortStore(store.r)

            async def all_joined() -> bool:
                stats = await cohorts.stats(MODEL)
                assert stats.get("joined", 0) <= len(labelled), f"{stats}: joined twice"
                return stats.get("joined", 0) == len(labelled)

            await wait_for(all_joined, timeout=120)
            stats = await cohorts.stats(MODEL)
            assert stats.get("unknown", 0) == 0 and stats.get("late", 0) == 0, stats
            alerts = (await http.get("/v1/alerts", params={"model": MODEL})).json()
            # the shifted feature alerts (PSI or a moment check, whichever the gate funds first)
            shifted = [a for a in alerts if a["feature"] == "income"]
            assert shifted, alerts
            first = min(a["fired_window_start"] for a in shifted)
            assert first in (start + 2 * WINDOW, start + 3 * WINDOW), shifted

            async def paged() -> bool:
                return any(MODEL in str(b) for b in sink.bodies)

            await wait_for(paged, timeout=60)
            assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.to_thread(proc.wait, 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        await store.close()
        redis.stop()
    assert code == 0, log_path.read_text(errors="replace")[-3000:]


async def _evaluated(store: Store, members: list[str]) -> bool:
    return all([await store.results(MODEL, m) is not None for m in members])


async def _logged(log_path, text: str) -> bool:
    return logged(log_path, text) == set(WORKERS)
