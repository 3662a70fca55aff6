"""The dashboard's pages and forms under ``/ui`` (server-rendered, Jinja2).

Every page needs a key of scope read (when ``FLEETWATCH_API_AUTH`` is on); the forms that
change state (acknowledge, resolve, silence) need scope write and a valid CSRF token, and
go through the same code as the API's endpoints, so the API answers what the dashboard
did. A form's answer is a redirect back to the page (post/redirect/get). Unknown models,
windows, features and incidents are answered 404 as a page.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from pydantic import ValidationError

from detectors.policy.silence import Matcher
from service.alerting.store import AlertStore
from service.api import alerts as alerts_api
from service.api import performance as performance_api
from service.api import silences as silences_api
from service.api.errors import ApiError
from service.api.incidents import summarize
from service.registry import ModelConfig
from service.ui import views
from service.ui.session import (
    LoginRequired,
    Session,
    UiError,
    anonymous_session,
    check_csrf,
    clear_key,
    principal_of,
    require_write,
    session,
    set_cookies,
)

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
router = APIRouter(prefix="/ui", include_in_schema=False)
SessionDep = Annotated[Session, Depends(session)]
SILENCE_HOURS = (1, 2, 4, 8, 24, 72)


def _fmt_time(t: float | int | None, seconds: int = 0) -> str:
    if t is None:
        return "–"
    d = datetime.fromtimestamp(float(t), UTC)
    return d.strftime("%Y-%m-%d") if seconds >= 86_400 else d.strftime("%Y-%m-%d %H:%M UTC")


def _num(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and (abs(v) < 1e-3 and v != 0):
        return f"{v:.2e}"
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def heat_row(row: views.FleetRow, heat: list[tuple[str, str]]) -> Markup:
    """One model's heatmap cells (``heat``: the columns' features and their quoted names),
    built here rather than in the template: a page holds up to 50 x 24 of them."""
    base = f"/ui/models/{quote(row.model_id, safe='')}/features/"
    out = []
    for f, fq in heat:
        c = (row.cells or {}).get(f)
        if c is None or c.ratio is None:
            out.append('<td class="c none"><span class="sr">no value</span></td>')
            continue
        mark = {"breach": "▲", "inconclusive": "?"}.get(c.status, "")
        out.append(f'<td class="c c{c.level} c-{c.status}"><a href="{base}{fq}" title="{escape(c.title)}">'
                   f"{mark}{c.ratio:.1f}</a></td>")
    return Markup("".join(out))


templates.env.globals["heat_row"] = heat_row
templates.env.filters.update(
    time=_fmt_time, num=_num, label=views.feature_label, q=lambda s: quote(str(s), safe="")
)


def _ctx(request: Request) -> views.Ctx:
    store = request.app.state.store
    return views.Ctx(store, AlertStore(store.r), request.app.state.settings)


def page(request: Request, s: Session, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """Render a page with the layout's context (who is signed in, the CSRF token)."""
    response = templates.TemplateResponse(
        request, name, {"s": s, "path": request.url.path, **context}, status_code=status
    )
    set_cookies(request, response)
    return response


async def _require_model(ctx: views.Ctx, model_id: str) -> None:
    if not await ctx.store.model_exists(model_id):
        raise UiError(404, "Unknown model", f"No model {model_id!r} is monitored.")


def _back(url: str, **params: str) -> RedirectResponse:
    return RedirectResponse(f"{url}?{urlencode(params)}" if params else url, status_code=303)


# -- login -------------------------------------------------------------------------------------


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


# -- pages -------------------------------------------------------------------------------------


def _fleet_query(params: dict[str, str]) -> views.FleetQuery:
    def int_of(name: str, lo: int, hi: int) -> int | None:
        raw = params.get(name) or None
        if raw is None:
            return None
        if not raw.isdigit() or not lo <= int(raw) <= hi:
            raise UiError(422, "Bad filter", f"{name} must be a whole number from {lo} to {hi}; got {raw!r}")
        return int(raw)

    sort = params.get("sort") or "health"
    if sort not in views.SORTS:
        raise UiError(422, "Bad sort", f"sort must be one of {', '.join(views.SORTS)}; got {sort!r}")
    health = params.get("health") or None
    if health is not None and health not in views.HEALTH_ORDER:
        raise UiError(422, "Bad filter", f"health must be one of {', '.join(views.HEALTH_ORDER)}")
    return views.FleetQuery(
        owner=params.get("owner") or None,
        tier=int_of("tier", 1, 3),
        source=params.get("source") or None,
        health=health,
        q=(params.get("q") or "")[:256] or None,
        sort=sort,
        desc=params.get("desc") == "1",
        page=int_of("page", 1, 1_000_000) or 1,
    )


@router.get("")
async def fleet(request: Request, s: SessionDep) -> HTMLResponse:
    q = _fleet_query(dict(request.query_params))
    data = await views.fleet(_ctx(request), q)
    base = {
        k: v for k, v in request.query_params.items() if k in ("owner", "tier", "source", "health", "q") and v
    }
    return page(
        request,
        s,
        "fleet.html",
        data=data,
        query=q,
        base=base,
        health_levels=views.HEALTH_ORDER,
        sorts=views.SORTS,
        urlencode=urlencode,
        heat=[(f, quote(f, safe="")) for f in data.heat_features],
    )


def _start(text: str) -> int:
    """A window start from a URL: Unix seconds."""
    if not text.isdigit() or len(text) > 12:
        raise UiError(422, "Bad window", f"a window is named by its start in Unix seconds; got {text!r}")
    return int(text)


@router.get("/models/{model_id}")
async def model_page(model_id: str, request: Request, s: SessionDep) -> HTMLResponse:
    ctx = _ctx(request)
    await _require_model(ctx, model_id)
    cfg = (await ctx.store.model_configs([model_id]))[model_id]
    perf = None
    if isinstance(cfg, ModelConfig) and cfg.joins_labels:
        perf = await performance_api.performance(
            model_id, request, from_=None, to=None, slice_=None, limit=1_000, offset=0
        )
        perf = {**perf, "cohorts": perf["cohorts"][-ctx.settings.ui_recent_windows :]}
    data = await views.model_view(ctx, model_id, perf)
    return page(request, s, "model.html", m=data)


@router.get("/models/{model_id}/features/{feature:path}")
async def feature_page(
    model_id: str, feature: str, request: Request, s: SessionDep, window: str | None = None
) -> HTMLResponse:
    ctx = _ctx(request)
    window = _start(window) if window else None
    await _require_model(ctx, model_id)
    data = await views.feature_view(ctx, model_id, feature, window)
    if data is None:
        raise UiError(
            404, "Unknown feature", f"Model {model_id!r} has no results or reference for feature {feature!r}."
        )
    if (
        window is not None
        and window not in data.windows
        and not await ctx.store.window_members(model_id, window, window)
    ):
        raise UiError(404, "Unknown window", f"No window of {model_id!r} starts at {window}.")
    return page(request, s, "feature.html", f=data)


@router.get("/models/{model_id}/windows/{start}")
async def window_page(model_id: str, start: str, request: Request, s: SessionDep) -> HTMLResponse:
    ctx = _ctx(request)
    start = _start(start)
    await _require_model(ctx, model_id)
    data = await views.window_view(ctx, model_id, start)
    if data is None:
        raise UiError(
            404, "Unknown window", f"No window of {model_id!r} starts at {start} ({_fmt_time(start)})."
        )
    return page(request, s, "window.html", w=data)


@router.get("/incidents")
async def incidents_page(request: Request, s: SessionDep, page_no: int = 1) -> HTMLResponse:
    size = 50
    got = await _ctx(request).alerts.incidents(0, size + 1, (max(page_no, 1) - 1) * size)
    return page(
        request,
        s,
        "incidents.html",
        incidents=[summarize(i) for i in got[:size]],
        page_no=max(page_no, 1),
        more=len(got) > size,
    )


async def _incident(request: Request, incident_id: str) -> dict[str, Any]:
    raw = await _ctx(request).alerts.incident(incident_id)
    if raw is None:
        raise UiError(404, "Unknown incident", f"No incident {incident_id!r}.")
    return summarize(raw)


@router.get("/incidents/{incident_id}")
async def incident_page(
    incident_id: str, request: Request, s: SessionDep, done: str | None = None
) -> HTMLResponse:
    data = await views.incident_view(_ctx(request), await _incident(request, incident_id))
    return page(request, s, "incident.html", i=data, done=done, silence_hours=SILENCE_HOURS)


@router.get("/fdr")
async def fdr_page(request: Request, s: SessionDep, epoch: int | None = None) -> HTMLResponse:
    data = await views.fdr_view(_ctx(request), epoch)
    return page(request, s, "fdr.html", g=data)


# -- actions -----------------------------------------------------------------------------------


def _actor(s: Session, by: str) -> str:
    """Who acts: the key's name when authentication is on, else what the form says."""
    return s.principal.name if s.auth else (by.strip() or "dashboard")


async def _act(
    request: Request, s: Session, alert_ids: list[str], action: str, by: str, comment: str
) -> None:
    require_write(s)
    body = alerts_api.UserAction(by=_actor(s, by)[:256], comment=comment or None)
    fn = alerts_api.ack_alert if action == "ack" else alerts_api.resolve_alert
    for aid in alert_ids:
        try:
            await fn(aid, body, request)
        except ApiError as exc:
            if exc.status_code != 409:  # already resolved: nothing to do for that one
                raise UiError(exc.status_code, "Not done", str(exc.detail)) from None


Csrf = Annotated[str, Form(max_length=256)]
By = Annotated[str, Form(max_length=256)]
Comment = Annotated[str, Form(max_length=2048)]


@router.post("/incidents/{incident_id}/silence")
async def silence(
    incident_id: str,
    request: Request,
    s: SessionDep,
    csrf: Csrf = "",
    by: By = "",
    comment: Comment = "",
    hours: Annotated[int, Form(ge=1, le=24 * 90)] = 2,
) -> Response:
    """Create a silence from the form's matchers (``matcher-N-name``, ``-value``, ``-regex``)."""
    check_csrf(request, csrf)
    require_write(s)
    await _incident(request, incident_id)
    form = await request.form()
    matchers = []
    for i in range(16):
        name, value = form.get(f"matcher-{i}-name"), form.get(f"matcher-{i}-value")
        if not name or not value:
            continue
        matchers.append({"name": name, "value": value, "regex": form.get(f"matcher-{i}-regex") == "on"})
    now = datetime.fromtimestamp(time.time(), UTC)
    try:
        spec = silences_api.SilenceRequest(
            matchers=[Matcher.model_validate(m) for m in matchers],
            starts_at=now,
            ends_at=now + timedelta(hours=hours),
            created_by=_actor(s, by),
            comment=comment or f"incident {incident_id}",
        )
        created = await silences_api.create_silence(spec, request)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UiError(
            422, "Silence refused", f"{'.'.join(map(str, err['loc'])) or 'matchers'}: {err['msg']}"
        ) from None
    except ApiError as exc:
        raise UiError(exc.status_code, "Silence refused", str(exc.detail)) from None
    return _back(f"/ui/incidents/{quote(incident_id)}", done=f"silence:{created.id}")


@router.post("/incidents/{incident_id}/{action}")
async def incident_action(
    incident_id: str,
    action: str,
    request: Request,
    s: SessionDep,
    csrf: Csrf = "",
    by: By = "",
    comment: Comment = "",
    alert: Annotated[str, Form(max_length=64)] = "",
) -> Response:
    """Acknowledge or resolve one alert of the incident (``alert``) or all its open ones."""
    check_csrf(request, csrf)
    if action not in ("ack", "resolve"):
        raise UiError(404, "Unknown action", f"No action {action!r}.")
    require_write(s)
    inc = await _incident(request, incident_id)
    wanted = "firing" if action == "ack" else None
    ids = [
        a["id"]
        for a in inc["alerts"]
        if a["state"] != "resolved"
        and (wanted is None or a["state"] == wanted)
        and (not alert or a["id"] == alert)
    ]
    if alert and not ids:
        raise UiError(
            409, "Not done", f"alert {alert!r} is not {'firing' if wanted else 'open'} in this incident"
        )
    await _act(request, s, ids, action, by, comment)
    return _back(f"/ui/incidents/{quote(incident_id)}", done=f"{action}:{len(ids)}")


@router.get("/{rest:path}")
async def not_found(rest: str, request: Request, s: SessionDep) -> Response:
    if rest == "":
        return RedirectResponse("/ui", status_code=307)
    raise UiError(404, "Not found", f"No dashboard page at /ui/{rest}.")


# -- wiring ------------------------------------------------------------------------------------


def install(app: FastAPI) -> None:
    """Mount the dashboard on ``app``: pages, static files, and its error pages."""
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
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
