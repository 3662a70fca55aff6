"""API key endpoints (admin scope): create (the token is shown once), list, revoke."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Body, Path
from pydantic import BaseModel, Field

from detectors.strict import LAX, StrictModel
from service.api.auth import Scope, StoredKey
from service.api.deps import ApiKeyStoreDep, CurrentKey
from service.api.errors import ApiError, ErrorBody
from service.api.params import Offset, limit_query

router = APIRouter(prefix="/v1/keys", tags=["keys"])
MAX_KEYS_PAGE = 1_000


class KeySpec(StrictModel):
    """The body of ``POST /v1/keys``."""

    name: str = Field(..., min_length=1, max_length=200, description="What the key is for, who holds it")
    scope: Scope = Field(Scope.read, description="read, write (implies read) or admin (implies write)",
                         **LAX)

    model_config = {"extra": "forbid", "json_schema_extra": {"examples": [
        {"name": "fraud-model-server", "scope": "write"}]}}


class KeyView(BaseModel):
    """A key as the API shows it: never its token or the token's hash."""

    id: str = Field(..., description="Key id (also the second part of the token)")
    name: str
    scope: Scope
    created_at: float = Field(..., description="Unix seconds")
    created_by: str | None = Field(None, description="Id of the key that created it (bootstrap: the "
                                                     "bootstrap admin key); null when auth is off")
    last_used_at: float | None = Field(None, description="Last authenticated request, Unix seconds "
                                                         "(to the minute)")
    revoked: bool
    revoked_at: float | None = Field(None, description="Unix seconds")

    model_config = {"json_schema_extra": {"examples": [{
        "id": "3f9c2a7b1d4e8f60", "name": "fraud-model-server", "scope": "write",
        "created_at": 1_714_564_800.0, "created_by": "bootstrap", "last_used_at": None,
        "revoked": False, "revoked_at": None}]}}


class KeyCreated(KeyView):
    """A new key with its token: shown in this answer only, never again."""

    token: str = Field(..., description="Send as 'Authorization: Bearer <token>' or 'X-API-Key: <token>'. "
                                        "Shown once: store it now")

    model_config = {"json_schema_extra": {"examples": [{
        "id": "3f9c2a7b1d4e8f60", "name": "fraud-model-server", "scope": "write",
        "created_at": 1_714_564_800.0, "created_by": "bootstrap", "last_used_at": None,
        "revoked": False, "revoked_at": None,
        "token": "fwk_3f9c2a7b1d4e8f60_q0A3Jb6Yc1n4mYlqC2a1Xg0a9-8fRkS5d3V7wUe2HtI"}]}}


def _view(key: StoredKey, last_used: float | None = None) -> KeyView:
    return KeyView(id=key.id, name=key.name, scope=key.scope, created_at=key.created_at,
                   created_by=key.created_by, last_used_at=last_used, revoked=key.revoked_at is not None,
                   revoked_at=key.revoked_at)


@router.post("", status_code=201, summary="Create an API key (its token is shown once)",
             responses={422: {"model": ErrorBody}})
async def create_key(
    body: Annotated[KeySpec, Body(openapi_examples={
        "model server": {"summary": "A model server that ingests and registers models",
                         "value": {"name": "fraud-model-server", "scope": "write"}},
        "dashboard": {"summary": "A read-only dashboard", "value": {"name": "grafana", "scope": "read"}},
    })],
    keys: ApiKeyStoreDep,
    principal: CurrentKey,
) -> KeyCreated:
    key, token = await keys.create(body.name, body.scope, time.time(),
                                               principal.key_id if principal else None)
    return KeyCreated(**_view(key).model_dump(), token=token)


@router.get("", summary="API keys, newest first (never their tokens)",
            responses={422: {"model": ErrorBody}})
async def list_keys(
    store: ApiKeyStoreDep,
    limit: Annotated[int, limit_query(MAX_KEYS_PAGE)] = 100,
    offset: Offset = 0,
) -> list[KeyView]:
    keys = await store.list(limit, offset)
    used = await store.last_used(k.id for k in keys)
    return [_view(k, used.get(k.id)) for k in keys]


@router.delete("/{key_id}", summary="Revoke an API key (it stays listed as revoked)",
               responses={404: {"model": ErrorBody}})
async def revoke_key(
    key_id: Annotated[str, Path(description="Key id",
                                openapi_examples={"key": {"value": "3f9c2a7b1d4e8f60"}})],
    store: ApiKeyStoreDep,
) -> KeyView:
    key = await store.revoke(key_id, time.time())
    if key is None:
        raise ApiError(404, "key_not_found", f"unknown API key {key_id!r}", "key_id")
    return _view(key, (await store.last_used([key_id]))[key_id])
