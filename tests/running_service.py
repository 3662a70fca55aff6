"""A real ``fleetwatch run`` (embedded broker and Redis) as a child process, for the tests of
the command line and of the README's workflow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from service.embedded import free_port
from service.endpoints import read_endpoints
from tests.test_cli_run_restart import wait_up

#: The settings `fleetwatch run` gets here: fewer partitions and a shorter checkpoint interval
#: than the defaults (a loaded two-core machine); no detection or alerting setting is changed.
RUN_ENV = {"FLEETWATCH_EMBEDDED_BROKER_STORAGE": "memory", "FLEETWATCH_TOPIC_PARTITIONS": "2",
           "FLEETWATCH_CHECKPOINT_INTERVAL_SECONDS": "0.3"}


@dataclass(frozen=True)
class Running:
    """A running ``fleetwatch run``: its data folder, API URL and the endpoint variables."""

    data_dir: Path
    api_url: str
    endpoints: dict[str, str]
    log: Path


@contextmanager
def fleetwatch_run(data_dir: Path, cwd: Path | None = None, **env: str) -> Iterator[Running]:
    """Start ``fleetwatch run`` on ``data_dir`` (its embedded broker and Redis), wait for its
    API, yield it; stop it with SIGTERM (it must exit 0)."""
    port = free_port()
    full = {k: v for k, v in os.environ.items()
            if k not in ("FLEETWATCH_KAFKA_BOOTSTRAP", "FLEETWATCH_REDIS_URL", "FLEETWATCH_API_URL")}
    full.update(RUN_ENV, FLEETWATCH_DATA_DIR=str(data_dir), FLEETWATCH_API_PORT=str(port), **env)
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir.parent / f"{data_dir.name}-run.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "service.cli", "run", "-v"], env=full, cwd=cwd,
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_up(proc, port)
            endpoints = read_endpoints(data_dir)
            yield Running(data_dir, f"http://127.0.0.1:{port}", endpoints, log_path)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(90)
    assert code == 0, log_path.read_text()[-3000:]


def until(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.25) -> object:
    """Poll ``condition`` until it returns a truthy value (returned).

    Raises
    ------
    TimeoutError
        Naming ``what``.
    """
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(interval)
    return value
