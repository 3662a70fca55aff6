"""What every route of the dashboard uses: the templates and their filters, rendering a
page, the page context, 404s for unknown models and incidents, and redirects."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from service.alerting.models import Incident
from service.alerting.store import AlertStore
from service.ui.session import Session, UiError, set_cookies
from service.ui.views.common import Ctx, feature_label
from service.ui.views.fleet import FleetRow

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")


def fmt_time(t: float | int | None, seconds: int = 0) -> str:
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


def heat_row(row: FleetRow, heat: list[tuple[str, str]]) -> Markup:
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
    time=fmt_time, num=_num, label=feature_label, q=lambda s: quote(str(s), safe="")
)


def ctx_of(request: Request) -> Ctx:
    store = request.app.state.store
    return Ctx(store, AlertStore(store.r), request.app.state.settings)


def page(request: Request, s: Session, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """Render a page with the layout's context (who is signed in, the CSRF token)."""
    response = templates.TemplateResponse(
        request, name, {"s": s, "path": request.url.path, **context}, status_code=status
    )
    set_cookies(request, response)
    return response


async def require_model(ctx: Ctx, model_id: str) -> None:
    if not await ctx.store.model_exists(model_id):
        raise UiError(404, "Unknown model", f"No model {model_id!r} is monitored.")


def back(url: str, **params: str) -> RedirectResponse:
    return RedirectResponse(f"{url}?{urlencode(params)}" if params else url, status_code=303)


def start_of(text: str) -> int:
    """A window start from a URL: Unix seconds."""
    if not text.isdigit() or len(text) > 12:
        raise UiError(422, "Bad window", f"a window is named by its start in Unix seconds; got {text!r}")
    return int(text)


async def incident_of(request: Request, incident_id: str) -> Incident:
    """The incident with its alerts; 404 as a page."""
    incident = await ctx_of(request).alerts.incident(incident_id)
    if incident is None:
        raise UiError(404, "Unknown incident", f"No incident {incident_id!r}.")
    return incident
