"""The command line: `fleetwatch run` on embedded infrastructure, the demo and simulator commands
(the commands over the API: tests/test_cli_api.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from typer.testing import CliRunner

from service.cli import app
from service.embedded import free_port

pytestmark = pytest.mark.integration  # runs `fleetwatch` in child processes


def _get(url: str) -> tuple[int, dict]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status, json.loads(resp.read())


def test_run_starts_embedded_broker_and_redis_and_stops_them_on_ctrl_c(tmp_path):
    port = free_port()
    env = dict(os.environ, FLEETWATCH_API_PORT=str(port), FLEETWATCH_DATA_DIR=str(tmp_path))
    env.pop("FLEETWATCH_KAFKA_BOOTSTRAP", None)
    env.pop("FLEETWATCH_REDIS_URL", None)
    proc = subprocess.Popen([sys.executable, "-m", "service.cli", "run"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, body = _get(f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "API did not come up"
                time.sleep(0.2)
        assert status == 200 and body == {"status": "ok", "redis": True}
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
        child_pids = [int(p) for p in children.stdout.split()]
        assert len(child_pids) == 3  # redis-server, the broker's object store (its log) and tansu
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    for name in ("FLEETWATCH_API_URL", "FLEETWATCH_KAFKA_BOOTSTRAP", "FLEETWATCH_REDIS_URL"):
        assert f"  export {name}=" in out  # the lines to paste in another shell
    for pid in child_pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.parametrize("command", ["bench", "demo"])
def test_unknown_scenario_is_refused_before_anything_runs(command, monkeypatch):
    ran = []
    monkeypatch.setattr("service.demo.run.run_demo", lambda *a, **k: ran.append("demo"))
    monkeypatch.setattr("service.sim.run.run_simulation", lambda *a, **k: ran.append("sim"))
    result = CliRunner().invoke(app, [command, "--scenario", "nope"], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and ran == []
    assert "unknown scenario 'nope'; known: short, default, week, fleet" in result.output


def test_bench_and_demo_run_the_named_scenario(tmp_path, monkeypatch):
    from service.sim.scenarios import SCENARIOS

    calls = []
    def demo(s, path, serve=False):
        calls.append(("demo", path) + (("serve",) if serve else ()))

    monkeypatch.setattr("service.demo.run.run_demo", demo)
    monkeypatch.setattr("service.sim.run.run_simulation",
                        lambda s, opts, path: calls.append(("sim", opts, path)))
    assert CliRunner().invoke(app, ["bench", "--scenario", "week"]).exit_code == 0
    out = tmp_path / "demo.json"
    assert CliRunner().invoke(app, ["demo", "--json", str(out)]).exit_code == 0
    assert CliRunner().invoke(app, ["demo", "--scenario", "none"]).exit_code == 0
    assert CliRunner().invoke(app, ["demo", "--serve"]).exit_code == 0  # keeps the dashboard up, no simulator
    assert calls == [("sim", SCENARIOS["week"], None),
                     ("demo", out), ("sim", SCENARIOS["short"], tmp_path / "demo.scorecard.json"),
                     ("demo", None), ("demo", None, "serve")]
