"""The dashboard's session: the API key in a cookie, CSRF tokens, scopes.

The dashboard uses the API's keys and scopes (:mod:`service.api.auth`): read to view,
write to acknowledge, resolve and silence. A key is never put in a URL:

- ``POST /ui/login`` takes the key from a form and sets cookie ``fw_key`` to it:
  ``HttpOnly`` (scripts cannot read it), ``Secure`` (HTTPS only; browsers also send it to
  http://localhost and http://127.0.0.1; setting ``FLEETWATCH_UI_COOKIE_SECURE``),
  ``SameSite=Strict`` (never sent with a request started by another site), path ``/ui``.
  Every page checks the key again (revoking a key ends its sessions at once).
- Every state-changing form carries a CSRF token, the signed double-submit pattern of
  OWASP's CSRF cheat sheet: cookie ``fw_csrf`` holds a random secret (HttpOnly,
  SameSite=Strict); the token is HMAC-SHA256 of the session's key digest under that
  secret. Another site can neither read the secret nor compute the token, so a forged
  form is refused (403) even if the browser sent the cookies. A request whose
  ``Origin`` header names another host is refused as well.

When ``FLEETWATCH_API_AUTH`` is off the dashboard, like the API, is open to whoever
reaches it (as an admin), and forms still carry CSRF tokens.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request, Response

from service.api.auth import BOOTSTRAP_ID, ApiKeyStore, Principal, Scope, is_bootstrap_key

KEY_COOKIE = "fw_key"
CSRF_COOKIE = "fw_csrf"
COOKIE_PATH = "/ui"
SESSION_SECONDS = 12 * 3600
ANONYMOUS = Principal("anonymous", "anonymous (authentication off)", Scope.admin)
VISITOR = Principal("visitor", "not signed in", Scope.read)


class UiError(Exception):
    """A page answered with an error status (rendered as a page, not JSON)."""

    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.title = title
        self.message = message


class LoginRequired(Exception):
    """No valid key in the session: the page redirects to the login form."""


@dataclass(frozen=True)
class Session:
    """Who is looking, and the CSRF token their forms carry."""

    principal: Principal
    csrf: str
    auth: bool

    @property
    def signed_in(self) -> bool:
        return self.principal is not VISITOR

    @property
    def can_write(self) -> bool:
        return self.principal.scope.grants(Scope.write)


def _token(secret: str, key: str | None) -> str:
    digest = hashlib.sha256((key or "").encode("utf-8", "surrogatepass")).hexdigest()
    return hmac.new(secret.encode(), digest.encode(), hashlib.sha256).hexdigest()


def csrf_secret(request: Request) -> str:
    """The session's CSRF secret: the cookie's, or a new one (set by :func:`set_cookies`)."""
    secret = request.cookies.get(CSRF_COOKIE)
    if not secret or len(secret) > 128:
        secret = request.state.__dict__.setdefault("new_csrf", secrets.token_urlsafe(32))
    return secret


async def principal_of(request: Request, key: str | None) -> Principal | None:
    """The principal of ``key`` (the configured bootstrap key or a stored, unrevoked one)."""
    if not key:
        return None
    settings = request.app.state.settings
    admin = settings.api_admin_key.get_secret_value() if settings.api_admin_key is not None else None
    if is_bootstrap_key(key, admin):
        return Principal(BOOTSTRAP_ID, "bootstrap admin key", Scope.admin)
    return await ApiKeyStore(request.app.state.store.r).verify(key, time.time())


async def session(request: Request) -> Session:
    """The dependency of every page: the viewer's principal (read scope at least).

    Raises
    ------
    LoginRequired
        Authentication is on and the cookie holds no valid key.
    """
    auth = request.app.state.settings.api_auth
    key = request.cookies.get(KEY_COOKIE)
    if not auth:
        principal: Principal | None = ANONYMOUS
    else:
        principal = await principal_of(request, key)
        if principal is None:
            raise LoginRequired
    return Session(principal, _token(csrf_secret(request), key if auth else None), auth)


SessionDep = Annotated[Session, Depends(session)]


def anonymous_session(request: Request) -> Session:
    """The session of a visitor not signed in (the login form, an error page before login)."""
    return Session(VISITOR, _token(csrf_secret(request), None), True)


def check_csrf(request: Request, token: str) -> None:
    """Refuse (403) a form whose token does not match the session, or that another site
    sent (``Origin`` naming another host)."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        raise UiError(403, "Forbidden", "this form was sent from another site")
    secret = request.cookies.get(CSRF_COOKIE)
    auth = request.app.state.settings.api_auth
    expected = None if not secret else _token(secret, request.cookies.get(KEY_COOKIE) if auth else None)
    if expected is None or not hmac.compare_digest(expected, token or ""):
        raise UiError(
            403, "Forbidden", "the form's CSRF token is missing or wrong: reload the page and submit it again"
        )


def require_write(s: Session) -> None:
    """Refuse (403) an action by a key whose scope is below write."""
    if not s.can_write:
        raise UiError(
            403,
            "Forbidden",
            f"acknowledging, resolving and silencing need an API key with "
            f"scope 'write'; this key ({s.principal.name}) has scope "
            f"{s.principal.scope.value!r}",
        )


def _cookie(request: Request, response: Response, name: str, value: str, max_age: int | None) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=COOKIE_PATH,
        httponly=True,
        secure=request.app.state.settings.ui_cookie_secure,
        samesite="strict",
    )


def set_cookies(request: Request, response: Response, key: str | None = None) -> None:
    """Set the CSRF secret if this request made one, and the session key if given."""
    new = request.state.__dict__.get("new_csrf")
    if new:
        _cookie(request, response, CSRF_COOKIE, new, None)
    if key is not None:
        _cookie(request, response, KEY_COOKIE, key, SESSION_SECONDS)


def clear_key(response: Response) -> None:
    response.delete_cookie(KEY_COOKIE, path=COOKIE_PATH)
