"""API keys: scopes, hashed storage in Redis, and the FastAPI dependency that checks them.

A key is a random token shown once, when it is created::

    fwk_<key id>_<secret>        secret: 32 random bytes, URL-safe base64

Redis holds only the SHA-256 of the whole token, never the token:

======================  ==========================================================
``{fw}:apikeys``        HASH key id -> JSON :class:`StoredKey` (name, scope,
                        created_at, revoked_at, ``token_sha256``)
``{fw}:apikeys:used``   HASH key id -> last use, Unix seconds (written at most
                        once per ``LAST_USED_RESOLUTION`` seconds per key)
======================  ==========================================================

Why SHA-256 and not a password hash (argon2, bcrypt, scrypt): a slow,
memory-hard hash protects *low-entropy* secrets (passwords people choose)
against offline guessing after a leak of the hashes. A token of 256 random bits
cannot be guessed whatever the speed of the hash: 2**255 SHA-256 evaluations on
average. A fast hash keeps every authenticated request cheap (a microsecond,
not the tens of milliseconds and megabytes per request of argon2, which would
itself be a denial-of-service lever). The stored digest is compared with
:func:`hmac.compare_digest`, in constant time.

Scopes are ordered: ``admin`` implies ``write`` implies ``read``. GETs need
``read``, POST/PUT/DELETE need ``write``, key management needs ``admin``
(:func:`include_secured` applies them per route).

A bootstrap admin key comes from the setting ``FLEETWATCH_API_ADMIN_KEY``; it
is configuration, not stored, and cannot be revoked through the API (change
the setting). Authentication is enforced only when ``FLEETWATCH_API_AUTH`` is
true (default false, so the demo and examples run without keys): production
must turn it on.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request, Security
from fastapi.routing import APIRoute
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer, SecurityScopes
from pydantic import Field

from detectors.strict import LAX, StrictModel
from service.api.errors import UNAVAILABLE_RESPONSE, ApiError, ErrorBody
from service.profiles.keys import GLOBAL
from service.runtime.redis_client import Client
from service.stored import Unreadable, encode_stored, read_stored

KEYS = f"{GLOBAL}apikeys"
LAST_USED = f"{GLOBAL}apikeys:used"
TOKEN_PREFIX = "fwk_"
SECRET_BYTES = 32
LAST_USED_RESOLUTION = 60.0
BOOTSTRAP_ID = "bootstrap"

log = logging.getLogger(__name__)


class Scope(StrEnum):
    """What a key may do: ``admin`` implies ``write`` implies ``read``."""

    read = "read"
    write = "write"
    admin = "admin"

    def grants(self, required: Scope) -> bool:
        """Whether a key of this scope may call an endpoint that needs ``required``."""
        return _RANK[self] >= _RANK[required]


_RANK = {Scope.read: 0, Scope.write: 1, Scope.admin: 2}


def token_sha256(token: str) -> str:
    """Hex SHA-256 of a token (UTF-8): what Redis stores instead of the token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token(key_id: str) -> str:
    """A fresh token for ``key_id``: ``fwk_<key id>_<32 random bytes, base64url>``."""
    return f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(SECRET_BYTES)}"


def key_id_of(token: str) -> str | None:
    """The key id a token names, or None if it is not of the ``fwk_<id>_<secret>`` form."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    key_id, sep, secret = token[len(TOKEN_PREFIX):].partition("_")
    if not sep or not secret or not key_id.isalnum() or not key_id.isascii():
        return None
    return key_id


class StoredKey(StrictModel):
    """A key as Redis holds it: its token only as a SHA-256 digest."""

    id: str
    name: str
    scope: Scope = Field(..., **LAX)
    created_at: float
    created_by: str | None = None
    revoked_at: float | None = None
    token_sha256: str


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request authenticated as."""

    key_id: str
    name: str
    scope: Scope


class ApiKeyStore:
    """Create, list, revoke and verify API keys in Redis.

    Parameters
    ----------
    r : service.runtime.redis_client.Client
        The client (``Store.r``).

    Notes
    -----
    Keys are few (people create them), so listing loads the hash and sorts in
    memory, as receivers and silences do.
    """

    def __init__(self, r: Client) -> None:
        self.r = r

    async def create(self, name: str, scope: Scope, now: float,
                     created_by: str | None = None) -> tuple[StoredKey, str]:
        """Store a new key; returns it and its token (the only time the token exists)."""
        key_id = secrets.token_hex(8)
        token = new_token(key_id)
        key = StoredKey(id=key_id, name=name, scope=scope, created_at=now, created_by=created_by,
                        token_sha256=token_sha256(token))
        await self.r.hset(KEYS, key_id, encode_stored(key))
        return key, token

    @staticmethod
    def _read(key_id: bytes | str, raw: bytes) -> StoredKey | None:
        """A stored key; an unreadable one is logged, counted and treated as absent."""
        key = read_stored(StoredKey, raw, role="api", kind="key",
                          key=key_id.decode() if isinstance(key_id, bytes) else key_id)
        return None if isinstance(key, Unreadable) else key

    async def get(self, key_id: str) -> StoredKey | None:
        raw = await self.r.hget(KEYS, key_id)
        return None if raw is None else self._read(key_id, raw)

    async def list(self, limit: int, offset: int = 0) -> list[StoredKey]:
        """A page of keys (revoked ones included), newest first."""
        read = (self._read(key_id, raw) for key_id, raw in (await self.r.hgetall(KEYS)).items())
        keys = [k for k in read if k is not None]
        keys.sort(key=lambda k: (k.created_at, k.id), reverse=True)
        return keys[offset:offset + limit]

    async def last_used(self, key_ids: Iterable[str]) -> dict[str, float | None]:
        ids = list(key_ids)
        if not ids:
            return {}
        raw = await self.r.hmget(LAST_USED, ids)
        return {k: None if v is None else float(v) for k, v in zip(ids, raw, strict=True)}

    async def revoke(self, key_id: str, now: float) -> StoredKey | None:
        """Revoke a key at ``now`` (a revoked key stays as it is); None if unknown."""
        key = await self.get(key_id)
        if key is None:
            return None
        if key.revoked_at is None:
            key = key.model_copy(update={"revoked_at": now})
            await self.r.hset(KEYS, key_id, encode_stored(key))
        return key

    async def verify(self, token: str, now: float) -> Principal | None:
        """The principal of a valid, unrevoked stored key; None otherwise.

        The digest of ``token`` is compared with the stored one by
        :func:`hmac.compare_digest`, so the time taken does not tell how much
        of it matched.
        """
        key_id = key_id_of(token)
        if key_id is None:
            return None
        async with self.r.pipeline(transaction=False) as p:
            p.hget(KEYS, key_id)
            p.hget(LAST_USED, key_id)
            raw, used = await p.execute()
        if raw is None:
            return None
        key = self._read(key_id, raw)
        if key is None:
            return None
        if not hmac.compare_digest(token_sha256(token).encode(), key.token_sha256.encode()):
            return None
        if key.revoked_at is not None:
            return None
        if used is None or now - float(used) >= LAST_USED_RESOLUTION:
            await self.r.hset(LAST_USED, key_id, repr(now))
        return Principal(key_id=key.id, name=key.name, scope=key.scope)


def same_secret(token: str, secret: str | None) -> bool:
    """Whether ``token`` is the configured ``secret`` (False when none is configured).

    The SHA-256 digests are compared by :func:`hmac.compare_digest`, so the time
    taken tells neither how much matched nor the secret's length.
    """
    if not secret:
        return False
    return hmac.compare_digest(hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest(),
                               hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest())


def is_bootstrap_key(token: str, admin_key: str | None) -> bool:
    """Whether ``token`` is the configured bootstrap admin key (constant-time compare)."""
    return same_secret(token, admin_key)


# -- the FastAPI side ------------------------------------------------------------------------

BEARER = HTTPBearer(
    auto_error=False, scheme_name="bearer",
    description="`Authorization: Bearer <API key>`. Enforced when FLEETWATCH_API_AUTH is true; the "
                "scopes listed per operation are the key scope it needs (admin > write > read).")
API_KEY_HEADER = APIKeyHeader(
    name="X-API-Key", auto_error=False, scheme_name="apiKey",
    description="`X-API-Key: <API key>` (what the SDK sends); an alternative to the bearer header.")

AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": "Invalid parameter or body (code `invalid_request` or more "
                                             "specific; `field` names it)"},
    401: {"model": ErrorBody, "description": "No API key, or an unknown or revoked one "
                                             "(code `unauthenticated`, header `WWW-Authenticate: Bearer`)"},
    403: {"model": ErrorBody, "description": "The key's scope is too small (code `forbidden`)"},
    503: UNAVAILABLE_RESPONSE,
}
BODY_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "The body cannot be read as JSON text (e.g. not UTF-8; "
                                             "code `bad_request`)"},
    413: {"model": ErrorBody, "description": "Request body larger than FLEETWATCH_API_MAX_BODY_BYTES "
                                             "(code `body_too_large`)"},
}


def _unauthenticated(message: str) -> ApiError:
    return ApiError(401, "unauthenticated", message, headers={"WWW-Authenticate": "Bearer"})


async def authorize(
    request: Request,
    security_scopes: SecurityScopes,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
    api_key: Annotated[str | None, Depends(API_KEY_HEADER)],
) -> Principal | None:
    """The dependency of every ``/v1`` route: the caller's key must grant the
    route's scope (``Security(authorize, scopes=[scope])``).

    Returns None without looking at headers when ``api_auth`` is off.

    Raises
    ------
    ApiError
        401 ``unauthenticated`` without a key or with an unknown or revoked
        one; 403 ``forbidden`` when the key's scope is too small.
    """
    settings = request.app.state.settings
    if not settings.api_auth:
        return None
    required = max((Scope(s) for s in security_scopes.scopes), key=_RANK.__getitem__, default=Scope.read)
    token = bearer.credentials if bearer is not None else api_key
    if not token:
        raise _unauthenticated(
            "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
    admin = settings.api_admin_key.get_secret_value() if settings.api_admin_key is not None else None
    if is_bootstrap_key(token, admin):
        principal: Principal | None = Principal(BOOTSTRAP_ID, "bootstrap admin key", Scope.admin)
    else:
        principal = await ApiKeyStore(request.app.state.store.r).verify(token, time.time())
    if principal is None:
        raise _unauthenticated("unknown or revoked API key")
    if not principal.scope.grants(required):
        raise ApiError(403, "forbidden", f"this endpoint needs an API key with scope {required.value!r} "
                       f"(or higher); this key has scope {principal.scope.value!r}")
    request.state.principal = principal
    return principal


def scope_for(route: APIRoute) -> Scope:
    """The scope a route needs by its method: GET/HEAD/OPTIONS read, anything else write."""
    return Scope.read if route.methods <= {"GET", "HEAD", "OPTIONS"} else Scope.write


def include_secured(app: FastAPI, router: APIRouter, scope: Scope | None = None) -> None:
    """Include ``router`` with :func:`authorize` on each route.

    Every route needs ``scope`` if given, else the scope of its method
    (:func:`scope_for`); the scope shows in the operation's OpenAPI security
    requirement (``{"bearer": ["write"]}``: OpenAPI 3.1 role names). Also
    documents the 401, 403 and (for routes with a body) 413 answers.
    """
    groups: dict[tuple[Scope, bool], list[APIRoute]] = {}
    for route in router.routes:
        if not isinstance(route, APIRoute):
            raise TypeError(f"include_secured takes API routes only, got {route!r}")
        groups.setdefault((scope or scope_for(route), route.body_field is not None), []).append(route)
    for (needed, has_body), routes in groups.items():
        group = APIRouter()
        group.routes.extend(routes)
        app.include_router(group, dependencies=[Security(authorize, scopes=[needed.value])],
                           responses={**AUTH_RESPONSES, **(BODY_RESPONSES if has_body else {})})


def document_scopes(app: FastAPI) -> None:
    """Name each operation's required scope in its OpenAPI description and as
    ``x-required-scope`` (taken from its security requirement)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = generate()
        for path_item in schema.get("paths", {}).values():
            for operation in path_item.values():
                scopes = {s for req in operation.get("security", ()) for ss in req.values() for s in ss}
                if len(scopes) != 1:
                    continue
                [needed] = scopes
                note = f"Needs an API key with scope `{needed}` (or higher) when FLEETWATCH_API_AUTH is on."
                text = operation.get("description")
                operation["description"] = f"{text}\n\n{note}" if text else note
                operation["x-required-scope"] = needed
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
