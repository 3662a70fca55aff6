"""The routes' dependencies: the stores and the caller, as ``Annotated`` aliases.

A route declares what it needs by type, e.g. ``alerts: AlertStoreDep`` or
``principal: CurrentKey``, and FastAPI resolves it per request; helpers that routes
share (404 on an unknown model) live here too, so no router imports another.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from service.alerting.store import AlertStore
from service.api.auth import Principal
from service.api.errors import ApiError
from service.profiles.store import Store


def store_of(request: Request) -> Store:
    """The application's :class:`~service.profiles.store.Store` (one client per process)."""
    return request.app.state.store


def alerts_of(request: Request) -> AlertStore:
    """The alert store over the application's Redis client."""
    return AlertStore(store_of(request).r)


def principal_of(request: Request) -> Principal | None:
    """The caller's API key as :func:`service.api.auth.authorize` verified it (None while
    ``api_auth`` is off)."""
    return getattr(request.state, "principal", None)


StoreDep = Annotated[Store, Depends(store_of)]
AlertStoreDep = Annotated[AlertStore, Depends(alerts_of)]
CurrentKey = Annotated[Principal | None, Depends(principal_of)]


async def require_model(store: Store, model_id: str) -> None:
    """Raises
    ------
    ApiError
        404 ``model_not_found`` (field ``model_id``) when the model is not registered.
    """
    if not await store.model_exists(model_id):
        raise ApiError(404, "model_not_found", f"unknown model {model_id!r}", "model_id")
