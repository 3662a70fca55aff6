"""The dashboard under ``/ui`` (server-rendered, Jinja2): its routers and error pages.

Every page needs a key of scope read (when ``FLEETWATCH_API_AUTH`` is on); the forms that
change state (acknowledge, resolve, silence) need scope write and a valid CSRF token.
``login`` signs in, ``pages`` shows, ``actions`` changes; ``page`` renders them all.
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from service.ui import actions, login, pages
from service.ui.page import HERE, page
from service.ui.session import LoginRequired, UiError, anonymous_session, session


def install(app: FastAPI) -> None:
    """Mount the dashboard on ``app``: pages, static files, and its error pages."""
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
    for router in (login.router, actions.router, pages.router):  # pages last: its catch-all 404
        app.include_router(router)

    async def ui_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, UiError)
        try:
            s = await session(request)
        except LoginRequired:
            s = anonymous_session(request)
        return page(request, s, "error.html", status=exc.status, title=exc.title, message=exc.message)

    async def login_required(request: Request, exc: Exception) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        if request.method != "GET":
            target = "/ui"
        return RedirectResponse(f"/ui/login?{urlencode({'next': target})}", status_code=303)

    app.add_exception_handler(UiError, ui_error)
    app.add_exception_handler(LoginRequired, login_required)
