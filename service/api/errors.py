"""One error body for every 4xx: ``{"code", "message", "field"}``."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None


class ApiError(HTTPException):
    """An HTTP error with a machine-readable code and the offending field."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(status, message)
        self.code = code
        self.field = field


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_req: Request, exc: ApiError) -> JSONResponse:
        body = ErrorBody(code=exc.code, message=exc.detail, field=exc.field)
        return JSONResponse(body.model_dump(), status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation(_req: Request, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0]
        loc = [str(p) for p in err.get("loc", ())]
        field = ".".join(loc[1:] if loc and loc[0] in ("query", "path", "body") else loc)
        body = ErrorBody(code="invalid_request", message=f"{field}: {err.get('msg')}", field=field)
        return JSONResponse(body.model_dump(), status_code=422)
