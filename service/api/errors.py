"""One error body for every 4xx: ``{"code", "message", "field"}``."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException


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

    @app.exception_handler(RequestValidationError)
    async def _validation(_req: Request, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0]
        loc = [str(p) for p in err.get("loc", ())]
        field = ".".join(loc[1:] if loc and loc[0] in ("query", "path", "body") else loc)
        body = ErrorBody(code="invalid_request", message=f"{field}: {err.get('msg')}", field=field)
        return JSONResponse(body.model_dump(), status_code=422)
