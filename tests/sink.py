"""A webhook receiver on loopback for tests that page (uvicorn in the test's event loop)."""

from __future__ import annotations

import contextlib

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from service.embedded import free_port


class Sink:
    """Records the JSON bodies POSTed to ``http://127.0.0.1:<port>/hook``; serve it with
    ``asyncio.create_task(sink.server.serve())`` or :meth:`serving`."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.port = free_port()

        async def hook(request: Request) -> Response:
            self.bodies.append(await request.json())
            return Response(status_code=204)

        config = uvicorn.Config(
            Starlette(routes=[Route("/hook", hook, methods=["POST"])]),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="off",
        )
        self.server = uvicorn.Server(config)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    @contextlib.asynccontextmanager
    async def serving(self):
        """Serve while the block runs."""
        import asyncio

        task = asyncio.create_task(self.server.serve())
        try:
            while not self.server.started:
                await asyncio.sleep(0.01)
            yield self
        finally:
            self.server.should_exit = True
            await task
