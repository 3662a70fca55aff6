"""The infrastructure roles run on (the configured Kafka and Redis, or embedded ones),
signal handling and the Prometheus port of the worker roles."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import REGISTRY, start_http_server

from service import metrics
from service.embedded import ensure_bucket, file_object_store, kafka_broker, kafka_broker_s3, redis_server
from service.endpoints import KAFKA_BOOTSTRAP, REDIS_URL, reusable_port
from service.settings import Settings

log = logging.getLogger("fleetwatch")
BROKER_BUCKET = "tansu"


@contextlib.contextmanager
def infrastructure(settings: Settings) -> Iterator[Settings]:
    """Yield settings whose Kafka and Redis are reachable: the configured ones,
    or an embedded broker / Redis (child processes, stopped on exit) for any
    that is unset."""
    children = []
    updates = {}
    try:
        # The ports of the last start on this data folder when free: the endpoints users
        # exported (service.endpoints) stay valid across restarts.
        data_dir = settings.data_dir.resolve()
        if settings.redis_url is None:
            redis = redis_server(data_dir / "redis", reusable_port(data_dir, REDIS_URL))
            redis.start()
            children.append(redis)
            updates["redis_url"] = f"redis://127.0.0.1:{redis.port}/0"
            updates["redis_cluster"] = False  # the embedded Redis is one server
        if settings.kafka_bootstrap is None:
            port = reusable_port(data_dir, KAFKA_BOOTSTRAP)
            if settings.embedded_broker_storage == "disk":  # the log survives restarts
                objects = file_object_store(data_dir / "broker-log")
                objects.start()
                children.append(objects)
                endpoint = f"http://127.0.0.1:{objects.port}"
                ensure_bucket(endpoint, BROKER_BUCKET)
                broker = kafka_broker_s3(data_dir / "broker", endpoint, BROKER_BUCKET, port)
            else:
                broker = kafka_broker(data_dir / "broker", port)
            broker.start()
            children.append(broker)
            updates["kafka_bootstrap"] = f"127.0.0.1:{broker.port}"
        if updates:
            log.info("embedded infrastructure: %s", updates)
        yield settings.model_copy(update=updates)
    finally:
        for child in reversed(children):
            child.stop()


def install_signal_handlers(stop: asyncio.Event) -> None:
    """SIGINT / SIGTERM set ``stop`` (graceful shutdown)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)


def start_metrics_server(settings: Settings) -> WSGIServer:
    """Serve this process' Prometheus metrics on ``listen_host:metrics_port`` (a thread).

    With ``api_auth`` on, the series labelled by model
    (:data:`service.metrics.MODEL_LABELLED`) are left out: this port checks no
    token (``/metrics`` of the API does).

    Returns
    -------
    wsgiref.simple_server.WSGIServer
        The server (``server_address``: the bound address and port).
    """
    registry = metrics.FleetLevel() if settings.api_auth else REGISTRY
    server, _thread = start_http_server(settings.metrics_port, addr=settings.listen_host, registry=registry)
    return server
