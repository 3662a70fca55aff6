"""The routes' dependencies: the settings, the stores and the caller, as ``Annotated`` aliases.

A route declares what it needs by type, e.g. ``alerts: AlertStoreDep``,
``settings: SettingsDep`` or ``principal: CurrentKey``, and FastAPI resolves it per
request; helpers that routes share live here too (:func:`require_model`, called once
the request validated, so a malformed request is 422 before an unknown model is 404),
so no router imports another and no route reads ``request.app.state`` itself.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from detectors.config import DetectorConfig
from service.alerting.silences import SilenceStore
from service.alerting.store import AlertStore
from service.api.auth import ApiKeyStore, Principal
from service.api.errors import ApiError
from service.paging.outbox import Outbox
from service.paging.receiver_store import ReceiverStore
from service.profiles.store import Store
from service.registry import ModelConfig
from service.settings import Settings


def settings_of(request: Request) -> Settings:
    """The application's :class:`~service.settings.Settings`."""
    return request.app.state.settings


def store_of(request: Request) -> Store:
    """The application's :class:`~service.profiles.store.Store` (one client per process)."""
    return request.app.state.store


def alerts_of(request: Request) -> AlertStore:
    """The alert store over the application's Redis client."""
    return AlertStore(store_of(request).r)


def silences_of(request: Request) -> SilenceStore:
    """The silence store over the application's Redis client."""
    return SilenceStore(store_of(request).r)


def receivers_of(request: Request) -> ReceiverStore:
    """The receiver store over the application's Redis client."""
    return ReceiverStore(store_of(request).r)


def outbox_of(request: Request) -> Outbox:
    """The notifications' outbox over the application's Redis client."""
    return Outbox(store_of(request).r)


def api_keys_of(request: Request) -> ApiKeyStore:
    """The API key store over the application's Redis client."""
    return ApiKeyStore(store_of(request).r)


def principal_of(request: Request) -> Principal | None:
    """The caller's API key as :func:`service.api.auth.authorize` verified it (None while
    ``api_auth`` is off)."""
    return getattr(request.state, "principal", None)


SettingsDep = Annotated[Settings, Depends(settings_of)]
StoreDep = Annotated[Store, Depends(store_of)]
AlertStoreDep = Annotated[AlertStore, Depends(alerts_of)]
SilenceStoreDep = Annotated[SilenceStore, Depends(silences_of)]
ReceiverStoreDep = Annotated[ReceiverStore, Depends(receivers_of)]
OutboxDep = Annotated[Outbox, Depends(outbox_of)]
ApiKeyStoreDep = Annotated[ApiKeyStore, Depends(api_keys_of)]
CurrentKey = Annotated[Principal | None, Depends(principal_of)]


async def require_model(store: Store, model_id: str) -> None:
    """Raises
    ------
    ApiError
        404 ``model_not_found`` (field ``model_id``) when the model is not registered.
    """
    if not await store.model_exists(model_id):
        raise ApiError(404, "model_not_found", f"unknown model {model_id!r}", "model_id")


async def editable_detector_config(store: Store, model_id: str) -> DetectorConfig:
    """The model's stored detector configuration to change: empty when it has none, or
    when the stored one does not parse (the write replaces it)."""
    own = await store.own_detector_config(model_id)
    return own if isinstance(own, DetectorConfig) else DetectorConfig()


async def config_in_force(store: Store, model_id: str) -> ModelConfig:
    """The model's configuration as the workers read it (the defaults when it has none or
    it does not parse): its windows' grid and time zone."""
    stored = (await store.model_configs([model_id]))[model_id]
    return stored if isinstance(stored, ModelConfig) else ModelConfig()
