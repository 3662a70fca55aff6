"""The FastAPI application."""

from __future__ import annotations

import contextlib
import logging
from typing import Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from prometheus_client.registry import Collector
from pydantic import BaseModel, Field
from redis.exceptions import RedisError

from service import metrics
from service.alerting.store import AlertStore
from service.api import (
    alert_metrics,
    alerts,
    drift,
    errors,
    incidents,
    ingest,
    keys,
    model_routes,
    performance,
    profiles,
    receivers,
    reference,
    silences,
    status,
)
from service.api import flush as flush_api
from service.api.auth import Scope, document_scopes, include_secured, same_secret
from service.api.errors import ApiError, ErrorBody
from service.api.limits import BodySizeLimit, RouteLimit
from service.profiles.store import Store
from service.runtime.roles import upgrade_key_layout
from service.settings import Settings
from service.ui import routes as ui

log = logging.getLogger(__name__)


class Health(BaseModel):
    """The answer of ``/healthz``: 200 while Redis answers, 503 otherwise."""

    status: Literal["ok", "degraded"]
    redis: bool = Field(..., description="Redis answered a PING")


def metrics_registry(settings: Settings, authorization: str | None) -> Collector:
    """What ``/metrics`` serves to a scrape sending this ``Authorization`` header.

    Everything when ``api_auth`` is off, or with ``Bearer <metrics_token>``; the
    fleet-level series (:class:`service.metrics.FleetLevel`) to a scrape without
    a bearer token.

    Raises
    ------
    ApiError
        401 ``unauthenticated`` when ``api_auth`` is on and the bearer token
        is not ``metrics_token`` (or none is configured).
    """
    if not settings.api_auth:
        return REGISTRY
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return metrics.FleetLevel()
    secret = settings.metrics_token.get_secret_value() if settings.metrics_token is not None else None
    if not same_secret(token, secret):
        raise ApiError(401, "unauthenticated", "the bearer token is not FLEETWATCH_METRICS_TOKEN",
                       headers={"WWW-Authenticate": "Bearer"})
    return REGISTRY


def create_app(settings: Settings, store: Store | None = None) -> FastAPI:
    """The API app. Uses ``store`` if given (shared with other roles in one
    process), else opens one on ``settings.redis_url`` for its lifetime."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        if not settings.api_auth:
            log.warning("API authentication is off (FLEETWATCH_API_AUTH=false): whoever reaches the API "
                        "can read and change everything. Turn it on in production (docs/api.md)")
        elif settings.api_admin_key is None:
            log.info("API authentication is on without a bootstrap key (FLEETWATCH_API_ADMIN_KEY): "
                     "only the keys stored in Redis are accepted")
        if settings.api_auth and settings.metrics_token is None:
            log.info("no FLEETWATCH_METRICS_TOKEN: /metrics serves fleet-level series only, never the "
                     "series labelled by model (docs/api.md, 'Metrics exposure')")
        own = store is None
        app.state.store = Store(settings.redis_url, settings.redis_cluster) if own else store
        if own:
            await upgrade_key_layout(app.state.store, settings)
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
    app.add_middleware(
        BodySizeLimit, max_bytes=settings.api_max_body_bytes,
        overrides=[RouteLimit("POST", r"/v1/models/[^/]+/reference", settings.api_max_reference_body_bytes)],
    )
    # Every /v1 route needs an API key when settings.api_auth is on: GETs scope read,
    # other methods write, key management admin (service.api.auth). /healthz, /metrics
    # and the OpenAPI docs stay open.
    for router in (model_routes.router, reference.router, profiles.router, status.router, alerts.router,
                   incidents.router, drift.router, performance.router,
                   ingest.router, silences.router, receivers.router, receivers.notifications_router):
        include_secured(app, router)
    include_secured(app, flush_api.router)  # POST: write scope
    include_secured(app, keys.router, Scope.admin)
    document_scopes(app)
    # The dashboard: its pages check the same keys and scopes themselves (service.ui.session).
    ui.install(app)

    @app.get("/healthz", tags=["ops"], summary="Liveness and Redis reachability (no API key needed)",
             response_model=Health,
             responses={200: {"content": {"application/json": {"example": {"status": "ok", "redis": True}}}},
                        503: {"model": Health, "description": "Redis unreachable", "content": {
                            "application/json": {"example": {"status": "degraded", "redis": False}}}}})
    async def healthz(request: Request) -> JSONResponse:
        try:
            ok = await request.app.state.store.ping()
        except Exception:
            ok = False
        body = {"status": "ok" if ok else "degraded", "redis": ok}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics", tags=["ops"], summary="Prometheus metrics (no API key needed)",
             description="With FLEETWATCH_API_AUTH on, the series labelled by model "
                         "(`fleetwatch_alert_effect_size`) are served only to a scrape sending "
                         "`Authorization: Bearer <FLEETWATCH_METRICS_TOKEN>`; without a token the "
                         "fleet-level series answer, a wrong token is 401.",
             response_class=PlainTextResponse,
             responses={200: {"description": "Prometheus text exposition format"},
                        401: {"model": ErrorBody, "description": "A bearer token that is not "
                              "FLEETWATCH_METRICS_TOKEN (code `unauthenticated`)"}})
    async def metrics_endpoint(request: Request) -> Response:
        registry = metrics_registry(request.app.state.settings, request.headers.get("authorization"))
        try:
            await alert_metrics.refresh(AlertStore(request.app.state.store.r))
        except (RedisError, OSError):  # Redis down: the process' own metrics still answer
            metrics.REDIS_ERRORS.inc()
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app
