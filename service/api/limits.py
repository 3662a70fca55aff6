"""Request body size limit: a pure ASGI middleware answering 413 with the error body.

A body is refused before it is read when its ``Content-Length`` says it is too
large, and while it streams (chunked transfer encoding, or a client that sends
more than it announced) as soon as the bytes received pass the limit: the
endpoint never holds more than the limit in memory. The 413 carries the
error body ``{"code": "body_too_large", "message", "field": null}``.

The limit is ``FLEETWATCH_API_MAX_BODY_BYTES`` (16 MiB), except where a route
takes more: ``POST /v1/models/{id}/reference`` (up to 100,000 rows) has its own,
``FLEETWATCH_API_MAX_REFERENCE_BODY_BYTES``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import ApiError


class BodyTooLarge(ApiError):
    """Raised from ``receive`` once a streamed body passes the limit. An
    ``HTTPException``, so FastAPI's request handler passes it on to the app's
    ``ApiError`` handler instead of calling it a parse error."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, "body_too_large", f"request body larger than {limit} bytes")


@dataclass(frozen=True, slots=True)
class RouteLimit:
    """A limit for the requests of ``method`` whose path matches ``path`` (a regex)."""

    method: str
    path: str
    max_bytes: int

    def matches(self, method: str, path: str) -> bool:
        return method == self.method and re.fullmatch(self.path, path) is not None


class BodySizeLimit:
    """Refuse request bodies larger than ``max_bytes`` (per-route ``overrides``) with 413.

    Parameters
    ----------
    app : ASGI app
    max_bytes : int
        Largest body accepted, in bytes.
    overrides : sequence of RouteLimit
        Routes with a limit of their own; the first match wins.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, overrides: Sequence[RouteLimit] = ()) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.app = app
        self.max_bytes = max_bytes
        self.overrides = tuple(overrides)

    def limit_for(self, scope: Scope) -> int:
        method, path = scope.get("method", ""), scope.get("path", "")
        return next((o.max_bytes for o in self.overrides if o.matches(method, path)), self.max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _refuse(send, limit)
            return

        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            # Raised where no exception handler caught it (e.g. read outside a route).
            if started:
                raise
            await _refuse(send, limit)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # a malformed header: the streaming count still applies
    return None


async def _refuse(send: Send, limit: int) -> None:
    error = BodyTooLarge(limit)
    body = json.dumps({"code": error.code, "message": error.detail, "field": None}).encode()
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
