"""The dashboard's pages: the fleet, a model, a feature, a window, incidents, the FDR gate.

Unknown models, windows, features and incidents are answered 404 as a page.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from service.api import performance as performance_api
from service.registry import ModelConfig
from service.ui.page import ctx_of, fmt_time, incident_of, page, require_model, start_of
from service.ui.session import SessionDep, UiError
from service.ui.views.fdr import fdr_view
from service.ui.views.feature import feature_view
from service.ui.views.fleet import HEALTH_ORDER, SORTS, FleetQuery
from service.ui.views.fleet import fleet as fleet_view
from service.ui.views.incident import incident_view
from service.ui.views.model import model_view
from service.ui.views.window import window_view

router = APIRouter(prefix="/ui", include_in_schema=False)
SILENCE_HOURS = (1, 2, 4, 8, 24, 72)


def _fleet_query(params: dict[str, str]) -> FleetQuery:
    def int_of(name: str, lo: int, hi: int) -> int | None:
        raw = params.get(name) or None
        if raw is None:
            return None
        if not raw.isdigit() or not lo <= int(raw) <= hi:
            raise UiError(422, "Bad filter", f"{name} must be a whole number from {lo} to {hi}; got {raw!r}")
        return int(raw)

    sort = params.get("sort") or "health"
    if sort not in SORTS:
        raise UiError(422, "Bad sort", f"sort must be one of {', '.join(SORTS)}; got {sort!r}")
    health = params.get("health") or None
    if health is not None and health not in HEALTH_ORDER:
        raise UiError(422, "Bad filter", f"health must be one of {', '.join(HEALTH_ORDER)}")
    return FleetQuery(
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
    data = await fleet_view(ctx_of(request), q)
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
        health_levels=HEALTH_ORDER,
        sorts=SORTS,
        urlencode=urlencode,
        heat=[(f, quote(f, safe="")) for f in data.heat_features],
    )


@router.get("/models/{model_id}")
async def model_page(model_id: str, request: Request, s: SessionDep) -> HTMLResponse:
    ctx = ctx_of(request)
    await require_model(ctx, model_id)
    cfg = (await ctx.store.model_configs([model_id]))[model_id]
    perf = None
    if isinstance(cfg, ModelConfig) and cfg.joins_labels:
        answer = await performance_api.performance(
            model_id, ctx.store, from_=None, to=None, slice_=None, limit=1_000, offset=0
        )
        perf = answer.model_dump()
        perf["cohorts"] = perf["cohorts"][-ctx.settings.ui_recent_windows :]
    data = await model_view(ctx, model_id, perf)
    return page(request, s, "model.html", m=data)


@router.get("/models/{model_id}/features/{feature:path}")
async def feature_page(
    model_id: str, feature: str, request: Request, s: SessionDep, window: str | None = None
) -> HTMLResponse:
    ctx = ctx_of(request)
    window = start_of(window) if window else None
    await require_model(ctx, model_id)
    data = await feature_view(ctx, model_id, feature, window)
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
    ctx = ctx_of(request)
    start = start_of(start)
    await require_model(ctx, model_id)
    data = await window_view(ctx, model_id, start)
    if data is None:
        raise UiError(
            404, "Unknown window", f"No window of {model_id!r} starts at {start} ({fmt_time(start)})."
        )
    return page(request, s, "window.html", w=data)


@router.get("/incidents")
async def incidents_page(request: Request, s: SessionDep, page_no: int = 1) -> HTMLResponse:
    size = 50
    got = await ctx_of(request).alerts.incidents(0, size + 1, (max(page_no, 1) - 1) * size)
    return page(
        request,
        s,
        "incidents.html",
        incidents=got[:size],
        page_no=max(page_no, 1),
        more=len(got) > size,
    )


@router.get("/incidents/{incident_id}")
async def incident_page(
    incident_id: str, request: Request, s: SessionDep, done: str | None = None
) -> HTMLResponse:
    data = await incident_view(ctx_of(request), await incident_of(request, incident_id))
    return page(request, s, "incident.html", i=data, done=done, silence_hours=SILENCE_HOURS)


@router.get("/fdr")
async def fdr_page(request: Request, s: SessionDep, epoch: int | None = None) -> HTMLResponse:
    data = await fdr_view(ctx_of(request), epoch)
    return page(request, s, "fdr.html", g=data)


@router.get("/{rest:path}")
async def not_found(rest: str, request: Request, s: SessionDep) -> Response:
    if rest == "":
        return RedirectResponse("/ui", status_code=307)
    raise UiError(404, "Not found", f"No dashboard page at /ui/{rest}.")
