"""The ``api`` role: uvicorn serving the API inside the running event loop."""

from __future__ import annotations

import asyncio

import uvicorn

from service.api.app import create_app
from service.profiles.store import Store
from service.settings import Settings


class ApiServer:
    """The API on ``listen_host:api_port`` (or ``port``: 0 takes a free one, read back as
    :attr:`port` once ``server.started``), until ``stop`` is set."""

    def __init__(self, settings: Settings, store: Store, port: int | None = None) -> None:
        config = uvicorn.Config(
            create_app(settings, store), host=settings.listen_host,
            port=settings.api_port if port is None else port, log_level="warning", lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.server.install_signal_handlers = lambda: None  # the runtime owns signals

    @property
    def port(self) -> int:
        return self.server.servers[0].sockets[0].getsockname()[1]

    async def run(self, stop: asyncio.Event) -> None:
        task = asyncio.create_task(self.server.serve())
        await stop.wait()
        self.server.should_exit = True
        await task
