"""One error body for every 4xx and 503: ``{"code", "message", "field"}``.

A Redis outage (:data:`service.profiles.store.UNAVAILABLE`) met by any route or by the
authentication of a stored key is answered 503 ``redis_unavailable`` with a
``Retry-After`` header (``Settings.api_retry_after_seconds``), never 500.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from service import metrics
from service.profiles.store import UNAVAILABLE

log = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    """The body of every 4xx (and 503) answer."""

    code: str = Field(..., description="Machine-readable error code, e.g. model_not_found, invalid_request")
    message: str = Field(..., description="What went wrong, naming the field")
    field: str | None = Field(None, description="The offending field (dotted path), if any")

    model_config = {"json_schema_extra": {"examples": [
        {"code": "invalid_request", "message": "limit: Input should be less than or equal to 1000",
         "field": "limit"}]}}


class ApiError(HTTPException):
    """An HTTP error with a machine-readable code and the offending field."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(status, message, headers=headers)
        self.code = code
        self.field = field


#: The 503 every Redis-backed route may answer, for the OpenAPI ``responses`` of /v1 routes.
UNAVAILABLE_RESPONSE: dict[str, Any] = {
    "model": ErrorBody,
    "description": "Redis (or, for ingest, Kafka) is unavailable: retry after `Retry-After` seconds "
                   "(code `redis_unavailable`, `broker_unavailable` or `ingest_unavailable`)",
    "headers": {"Retry-After": {"description": "Seconds to wait before retrying (Redis outages)",
                                "schema": {"type": "integer"}}},
}


def unavailable(code: str, message: str, retry_after: int) -> ApiError:
    """A 503 with ``Retry-After`` (a dependency such as Kafka cannot serve now)."""
    return ApiError(503, code, message, headers={"Retry-After": str(retry_after)})


# Codes of the errors raised by FastAPI / Starlette themselves (not ApiError).
HTTP_CODES = {400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
              405: "method_not_allowed", 413: "body_too_large", 415: "unsupported_media_type"}


def install(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_req: Request, exc: StarletteHTTPException) -> JSONResponse:
        # e.g. 400 for a body that is not UTF-8, 404 for an unknown path, 405
        body = ErrorBody(code=HTTP_CODES.get(exc.status_code, "http_error"), message=str(exc.detail))
        return JSONResponse(body.model_dump(), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(ApiError)
    async def _api_error(_req: Request, exc: ApiError) -> JSONResponse:
        body = ErrorBody(code=exc.code, message=exc.detail, field=exc.field)
        return JSONResponse(body.model_dump(), status_code=exc.status_code, headers=exc.headers)

    async def _unavailable(req: Request, exc: Exception) -> JSONResponse:
        metrics.REDIS_ERRORS.inc()
        log.warning("redis unavailable (%s %s): %s", req.method, req.url.path, exc)
        body = ErrorBody(code="redis_unavailable",
                         message=f"Redis is unavailable ({type(exc).__name__}); retry later")
        retry = req.app.state.settings.api_retry_after_seconds
        return JSONResponse(body.model_dump(), status_code=503, headers={"Retry-After": str(retry)})

    for kind in UNAVAILABLE:
        app.add_exception_handler(kind, _unavailable)

    @app.exception_handler(RequestValidationError)
    async def _validation(_req: Request, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0]
        loc = [str(p) for p in err.get("loc", ())]
        field = ".".join(loc[1:] if loc and loc[0] in ("query", "path", "body") else loc)
        body = ErrorBody(code="invalid_request", message=f"{field}: {err.get('msg')}", field=field)
        return JSONResponse(body.model_dump(), status_code=422)
