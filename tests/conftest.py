"""Fixtures: a real Kafka-protocol broker (Tansu) and a real Redis server, started
once per test session as child processes (or taken from FLEETWATCH_KAFKA_BOOTSTRAP /
FLEETWATCH_REDIS_URL when set).

``FLEETWATCH_TEST_REDIS=cluster`` runs the integration tests on a local Redis Cluster
instead (three masters, three replicas: :class:`service.embedded.LocalRedisCluster`), or,
with ``FLEETWATCH_REDIS_URL``, on the cluster that URL names a node of. A test module can
do the same for its own tests by overriding ``redis_url`` and ``redis_is_cluster``
(tests/test_redis_cluster.py)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from service.api.server import ApiServer
from service.embedded import (
    create_bucket,
    kafka_broker,
    kafka_broker_s3,
    redis_cluster,
    redis_server,
    s3_server,
)
from service.profiles.keys import profile_key, window_index_key, window_member
from service.profiles.store import Store
from service.runtime.redis_client import flush
from service.settings import Settings
from sketches.profile import WindowProfile


@pytest.fixture(scope="session")
def redis_is_cluster() -> bool:
    """The integration tests run on a Redis Cluster (``FLEETWATCH_TEST_REDIS=cluster``)."""
    return os.environ.get("FLEETWATCH_TEST_REDIS", "standalone") == "cluster"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory, redis_is_cluster: bool):
    if url := os.environ.get("FLEETWATCH_REDIS_URL"):
        yield url
        return
    if redis_is_cluster:
        cluster = redis_cluster(Path(tmp_path_factory.mktemp("redis-cluster")))
        try:
            cluster.start()
            yield cluster.url
        finally:
            cluster.stop()
        return
    server = redis_server(Path(tmp_path_factory.mktemp("redis")))
    server.start()
    yield f"redis://127.0.0.1:{server.port}/0"
    server.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory):
    if bootstrap := os.environ.get("FLEETWATCH_KAFKA_BOOTSTRAP"):
        yield bootstrap
        return
    broker = kafka_broker(Path(tmp_path_factory.mktemp("broker")))
    broker.start()
    yield f"127.0.0.1:{broker.port}"
    broker.stop()


@pytest.fixture
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory):
    """An S3-compatible object store (moto's server) as a child process: ``http://host:port``."""
    server = s3_server(Path(tmp_path_factory.mktemp("s3")))
    server.start(timeout=60)
    yield f"http://127.0.0.1:{server.port}"
    server.stop()


@pytest.fixture
def restartable_broker(s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory):
    """A Tansu broker whose storage is a bucket in ``s3_endpoint``, so it can be stopped or
    killed and started again (``.start()``: same port, same storage) with its log and
    consumer-group offsets intact. Yields the ``ChildProcess``."""
    bucket = f"tansu-{uuid.uuid4().hex[:8]}"
    create_bucket(s3_endpoint, bucket)
    broker = kafka_broker_s3(Path(tmp_path_factory.mktemp("broker-s3")), s3_endpoint, bucket)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def settings(kafka_bootstrap: str, redis_url: str, redis_is_cluster: bool) -> Settings:
    """Settings with topics and groups unique to the test."""
    tag = uuid.uuid4().hex[:8]
    return Settings(
        kafka_bootstrap=kafka_bootstrap,
        redis_url=redis_url,
        redis_cluster=redis_is_cluster,
        predictions_topic=f"pred-{tag}",
        dead_letter_topic=f"dlq-{tag}",
        aggregator_group=f"agg-{tag}",
        detector_group=f"det-{tag}",
        topic_partitions=4,
        checkpoint_interval_seconds=0.2,
        idle_close_seconds=1.0,
        allowed_lateness_seconds=0,
    )


@pytest_asyncio.fixture
async def store(settings: Settings):
    s = Store(settings.redis_url, settings.redis_cluster)
    await flush(s.r)
    yield s
    await s.close()


@pytest_asyncio.fixture
async def api_url(settings: Settings, store: Store):
    """The API served over real HTTP (uvicorn) on the test's Redis."""
    server = ApiServer(settings, store, port=0)
    stop = asyncio.Event()
    task = asyncio.create_task(server.run(stop))
    while not server.server.started:
        await asyncio.sleep(0.02)
    yield f"http://127.0.0.1:{server.port}"
    stop.set()
    await task


async def put_window(store: Store, profile: WindowProfile, version: str = "1") -> str:
    """Store a closed window's profile and index it, as the aggregator does (no event);
    its index member."""
    member = window_member(profile.window_seconds, profile.window_start, version)
    await store.r.set(profile_key(profile.model_id, member), profile.to_bytes())
    await store.r.zadd(window_index_key(profile.model_id), {member: profile.window_start})
    await store.r.sadd("{fw}:models", profile.model_id)
    return member


async def wait_for(
    condition: Callable[[], Awaitable[bool]], timeout: float = 30.0, interval: float = 0.05
) -> None:
    """Poll an async condition until it holds.

    Raises
    ------
    TimeoutError
    """
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(interval)


# -- unit and integration tests ----------------------------------------------------------
#: Fixtures that bring up real infrastructure: a test that uses one (directly or through
#: another fixture) is an integration test.
INFRASTRUCTURE = frozenset({"kafka_bootstrap", "redis_url", "s3_endpoint", "restartable_broker"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test ``integration`` (it uses a fixture of :data:`INFRASTRUCTURE`, or its
    module declares ``pytestmark = pytest.mark.integration`` because it starts servers or
    processes itself) or else ``unit``. ``-m unit`` runs the pure tests; a unit test that
    opens a connection or starts a process fails (:func:`_unit_tests_do_no_io`), so a test
    cannot be left out of the integration run by a wrong mark. Then put the long modules
    first (:func:`_long_modules_first`)."""
    for item in items:
        if item.get_closest_marker("integration") is None:
            if INFRASTRUCTURE & set(getattr(item, "fixturenames", ())):
                item.add_marker(pytest.mark.integration)
            else:
                item.add_marker(pytest.mark.unit)
    items[:] = _long_modules_first(items, float(config.getini("timeout") or 0))


# -- running on several workers ----------------------------------------------------------
# pyproject's addopts run the suite with ``-n auto --dist loadfile``: one worker process per
# CPU (pytest-xdist), each with its own broker, Redis, ports and temporary folders (the
# session fixtures above), and every test file whole on one worker, so a module's fixtures
# (a Redis Cluster, the demo, a browser) start once.


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` for a run that names only test files or tests (``pytest tests/test_x.py
    -k y``): no workers, so it starts as fast as without pytest-xdist (its files would run on
    one worker anyway). Otherwise (the suite, folders, ``-m``) pytest-xdist's own count: one
    per CPU, or ``PYTEST_XDIST_AUTO_NUM_WORKERS``."""
    named = [a.split("::")[0] for a in config.args]
    if named and all(a.endswith(".py") for a in named):
        return 0
    return None


def _declared_timeout(item: pytest.Item, default: float) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is None:
        return default
    timeout = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
    return default if timeout is None else float(timeout)


def _long_modules_first(items: list[pytest.Item], default_timeout: float) -> list[pytest.Item]:
    """The tests in the order the workers take their files: the modules that declare a
    longer timeout than the suite's (they run for minutes: the demo, a browser, the Redis
    Cluster, ``fleetwatch run``) first, longest declared first, then the other integration
    modules, then the unit tests; collection order otherwise, and within a module.

    pytest-xdist (``--no-loadscope-reorder``) hands a free worker the next file in this
    order, so no long module starts last on one worker while the other waits idle. In a
    run on one process the order changes nothing but which files run first."""
    modules: dict[str, tuple[float, bool, int]] = {}
    for index, item in enumerate(items):
        module = item.nodeid.split("::")[0]
        timeout, unit, first = modules.get(module, (0.0, True, index))
        modules[module] = (max(timeout, _declared_timeout(item, default_timeout)),
                           unit and item.get_closest_marker("unit") is not None, first)

    def rank(module: str) -> tuple[float, bool, int]:
        timeout, unit, first = modules[module]
        return (-timeout if timeout > default_timeout else 0.0, unit, first)

    return sorted(items, key=lambda item: rank(item.nodeid.split("::")[0]))


class UnitTestIO(AssertionError):
    """A test marked ``unit`` opened a connection or started a process."""


@pytest.fixture(autouse=True)
def _unit_tests_do_no_io(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("unit") is None:
        return
    import socket
    import subprocess

    def refuse(*_args, **_kwargs):
        raise UnitTestIO(f"{request.node.nodeid} is marked unit but does I/O: give its module "
                         "pytestmark = pytest.mark.integration")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
