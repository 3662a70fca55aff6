"""The FastAPI application."""

from __future__ import annotations

import contextlib
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from service.api import alerts, drift, errors, incidents, ingest, models, performance, receivers, silences
from service.settings import Settings
from service.store import Store


def create_app(settings: Settings, store: Store | None = None) -> FastAPI:
    """The API app. Uses ``store`` if given (shared with other roles in one
    process), else opens one on ``settings.redis_url`` for its lifetime."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        own = store is None
        app.state.store = Store(settings.redis_url) if own else store
        try:
            yield
        finally:
            await ingest.close(app)
            if own:
                await app.state.store.close()

    app = FastAPI(
        title="fleetwatch",
        summary="Fleet-wide ML model monitoring: profiles, drift and alerts.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = settings
    if store is not None:
        app.state.store = store
    errors.install(app)
    app.include_router(models.router)
    app.include_router(alerts.router)
    app.include_router(incidents.router)
    app.include_router(drift.router)
    app.include_router(performance.router)
    app.include_router(ingest.router)
    app.include_router(silences.router)
    app.include_router(receivers.router)
    app.include_router(receivers.notifications_router)

    @app.get("/healthz", tags=["ops"], summary="Liveness and Redis reachability")
    async def healthz(request: Request) -> Any:
        try:
            ok = await request.app.state.store.ping()
        except Exception:
            ok = False
        body = {"status": "ok" if ok else "degraded", "redis": ok}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics", tags=["ops"], summary="Prometheus metrics")
    async def metrics_endpoint() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return app
