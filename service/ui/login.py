"""The dashboard's sign-in: an API key pasted once, kept in a cookie (``service.ui.session``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from service.ui.page import page
from service.ui.session import SessionDep, anonymous_session, check_csrf, clear_key, principal_of, set_cookies

router = APIRouter(prefix="/ui", include_in_schema=False)


def _safe_next(target: str | None) -> str:
    """A post-login destination: a path of the dashboard only (no open redirect)."""
    if target and target.startswith("/ui") and not target.startswith("//") and "\\" not in target:
        return target
    return "/ui"


@router.get("/login")
async def login_form(request: Request, next: str | None = None) -> HTMLResponse:
    if not request.app.state.settings.api_auth:
        return RedirectResponse("/ui", status_code=303)
    return page(request, anonymous_session(request), "login.html", next=_safe_next(next), error=None)


@router.post("/login")
async def login(
    request: Request,
    key: Annotated[str, Form(max_length=512)],
    csrf: Annotated[str, Form(max_length=256)] = "",
    next: Annotated[str, Form(max_length=2048)] = "/ui",
) -> Response:
    check_csrf(request, csrf)
    principal = await principal_of(request, key.strip())
    if principal is None:
        return page(
            request,
            anonymous_session(request),
            "login.html",
            status=401,
            next=_safe_next(next),
            error="Unknown or revoked API key.",
        )
    response = RedirectResponse(_safe_next(next), status_code=303)
    set_cookies(request, response, key.strip())
    return response


@router.post("/logout")
async def logout(
    request: Request, s: SessionDep, csrf: Annotated[str, Form(max_length=256)] = ""
) -> Response:
    check_csrf(request, csrf)
    response = RedirectResponse("/ui/login", status_code=303)
    clear_key(response)
    return response
