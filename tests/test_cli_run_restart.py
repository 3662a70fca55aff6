"""`fleetwatch run` stopped and started again on the same data folder: its embedded Redis
kept its state (the aggregator's checkpoints), and its embedded broker kept its log (the
default, disk storage) or started empty (memory storage: the aggregator notices the log
went backwards). Either way predictions sent after the restart are aggregated, none twice;
the endpoints file and the broker address stay the same; the SDK connects with
``Client.from_env``; ``fleetwatch flush`` closes a model's open windows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sdk.client import Client
from service.embedded import free_port
from service.endpoints import API_URL, KAFKA_BOOTSTRAP, REDIS_URL, read_endpoints
from service.profiles.store import Store
from service.settings import Settings
from tests.conftest import wait_for
from tests.roles import window_counts
from tests.test_profiles_broker_restart import aggregated
from tests.test_profiles_crash_safety import MODELS, WINDOW, workload

pytestmark = pytest.mark.integration  # runs `fleetwatch run` in child processes


def start_run(data_dir, api_port: int, log, storage: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FLEETWATCH_KAFKA_BOOTSTRAP", "FLEETWATCH_REDIS_URL")}
    env.update({
        "FLEETWATCH_DATA_DIR": str(data_dir), "FLEETWATCH_API_PORT": str(api_port),
        "FLEETWATCH_CHECKPOINT_INTERVAL_SECONDS": "0.3", "FLEETWATCH_IDLE_CLOSE_SECONDS": "3600",
        "FLEETWATCH_LOG_REWIND_CONFIRM_SECONDS": "0.5", "FLEETWATCH_EMBEDDED_BROKER_STORAGE": storage,
    })
    return subprocess.Popen([sys.executable, "-m", "service.cli", "run", "-v"], env=env,
                            stdout=log, stderr=subprocess.STDOUT)


def wait_up(proc: subprocess.Popen, api_port: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, "fleetwatch run exited"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/healthz", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError("fleetwatch run did not come up") from None
            time.sleep(0.2)


def register(api_url: str, model_id: str) -> None:
    req = urllib.request.Request(f"{api_url}/v1/models/{model_id}", method="PUT",
                                 data=json.dumps({"window_seconds": WINDOW}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


def metric(api_port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name)


def send(endpoints: dict[str, str], records) -> None:
    with Client.from_env(endpoints) as fw:
        for r in records:
            fw.log_prediction(r.model_id, r.features, model_version=r.model_version,
                              prediction_id=r.prediction_id, event_time=r.event_time, score=r.score)
        assert fw.flush(30)
    assert fw.stats.dropped == 0


@pytest.mark.timeout(600)
@pytest.mark.parametrize("storage", ["disk", "memory"])
async def test_restart_on_the_same_folder_keeps_ingesting(storage, tmp_path):
    data_dir, api_port = tmp_path / "data", free_port()
    before = workload(1_500, windows=2, seed=3)
    after = workload(1_500, windows=2, seed=4)
    for r in after:  # from the window ``before`` left open on
        r.event_time += WINDOW
    settings = Settings(predictions_topic="fw.predictions", topic_partitions=8)
    with open(tmp_path / "run.log", "ab") as log:
        proc = start_run(data_dir, api_port, log, storage)
        try:
            wait_up(proc, api_port)
            first = read_endpoints(data_dir)
            assert first[API_URL] == f"http://127.0.0.1:{api_port}"
            store = Store(first[REDIS_URL])
            try:
                for m in MODELS:
                    register(first[API_URL], m)
                send(first, before)
                await wait_for(lambda: _equals(store, settings, len(before)), timeout=90)
                assert proc.send_signal(signal.SIGTERM) is None and proc.wait(60) == 0
                proc = start_run(data_dir, api_port, log, storage)
                wait_up(proc, api_port)
                second = read_endpoints(data_dir)
                assert second == first  # same ports: the exported lines still hold
                send(second, after)
                await wait_for(lambda: _equals(store, settings, len(before) + len(after)), timeout=120)
                rewinds = metric(api_port, "fleetwatch_log_discontinuities_total")
                # disk: the log is intact, the aggregator resumes at its offsets; memory: the
                # log is gone, the aggregator notices and reads the new one from its start.
                assert rewinds == 0 if storage == "disk" else rewinds >= 1
                assert metric(api_port, "fleetwatch_records_consumed_total") == len(after)
                # The end of a replay: `fleetwatch flush` closes the model's open windows now.
                out = subprocess.run([sys.executable, "-m", "service.cli", "flush", "fraud"],
                                     env={**os.environ, API_URL: second[API_URL]},
                                     capture_output=True, text=True, timeout=60)
                assert out.returncode == 0, out.stderr
                assert "flush of fraud requested" in out.stdout
                fraud = sum(r.model_id == "fraud" for r in before + after)

                async def fraud_closed() -> bool:
                    return sum((await window_counts(store, "fraud")).values()) == fraud
                await wait_for(fraud_closed, timeout=60)
            finally:
                await store.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    assert {r.model_id for r in after} == set(MODELS)


async def _equals(store, settings, n: int) -> bool:
    got = await aggregated(store, settings)
    assert got <= n, f"{got} records aggregated, only {n} sent: counted twice"
    return got == n


def test_endpoints_file_round_trips_and_from_env_requires_the_bootstrap(tmp_path):
    from service.endpoints import Endpoints, previous_port, write_endpoints

    e = Endpoints("http://127.0.0.1:8000", "127.0.0.1:19092", "redis://127.0.0.1:16379/0")
    path = write_endpoints(tmp_path, e)
    assert path.read_text().count("export FLEETWATCH_") == 3
    assert read_endpoints(tmp_path) == e.variables()
    assert previous_port(tmp_path, KAFKA_BOOTSTRAP) == 19092
    assert previous_port(tmp_path, REDIS_URL) == 16379
    assert read_endpoints(tmp_path / "nothing") == {}
    with pytest.raises(ValueError, match="FLEETWATCH_KAFKA_BOOTSTRAP is not set"):
        Client.from_env({})
    with pytest.raises(ValueError, match="not a boolean"):
        Client.from_env({KAFKA_BOOTSTRAP: "h:1", "FLEETWATCH_KAFKA_ENABLE_IDEMPOTENCE": "maybe"})
    fw = Client.from_env({KAFKA_BOOTSTRAP: "h:1", "FLEETWATCH_PREDICTIONS_TOPIC": "p"}, batch_size=7)
    assert (fw._delivery.topic, fw._delivery.batch_size) == ("p", 7)


def test_embedded_servers_die_with_their_parent(tmp_path):
    """A SIGKILLed parent leaves no embedded server behind (it would hold the port and, for
    the broker, the data folder's log)."""
    from service.embedded import wait_for_port

    code = ("import sys, time; from pathlib import Path; from service.embedded import redis_server; "
            "r = redis_server(Path(sys.argv[1])); r.start(); print(r.port, flush=True); time.sleep(600)")
    parent = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    port = int(parent.stdout.readline())
    wait_for_port(port)
    parent.kill()
    parent.wait(10)
    deadline = time.monotonic() + 10
    while True:
        try:
            wait_for_port(port, timeout=0.1)
        except TimeoutError:
            return  # nothing listens any more
        assert time.monotonic() < deadline, "the child outlived its parent"
        time.sleep(0.1)
