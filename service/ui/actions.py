"""The dashboard's forms that change state: acknowledge, resolve, silence.

Each needs scope write and a valid CSRF token, and goes through the same code as the
API's endpoints, so the API answers what the dashboard did. A form's answer is a
redirect back to the page (post/redirect/get).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from pydantic import ValidationError

from detectors.policy.silence import Matcher
from service.alerting.silences import SilenceStore
from service.api import alerts as alerts_api
from service.api import silences as silences_api
from service.api.errors import ApiError
from service.ui.page import back, ctx_of, incident_of
from service.ui.session import Session, SessionDep, UiError, check_csrf, require_write

router = APIRouter(prefix="/ui", include_in_schema=False)


def _actor(s: Session, by: str) -> str:
    """Who acts: the key's name when authentication is on, else what the form says."""
    return s.principal.name if s.auth else (by.strip() or "dashboard")


async def _act(
    request: Request, s: Session, alert_ids: list[str], action: str, by: str, comment: str
) -> None:
    require_write(s)
    body = alerts_api.UserAction(by=_actor(s, by)[:256], comment=comment or None)
    fn = alerts_api.ack_alert if action == "ack" else alerts_api.resolve_alert
    alerts = ctx_of(request).alerts
    for aid in alert_ids:
        try:
            await fn(aid, body, alerts)
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
    await incident_of(request, incident_id)
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
        ctx = ctx_of(request)
        created = await silences_api.create_silence(spec, SilenceStore(ctx.store.r), ctx.settings)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UiError(
            422, "Silence refused", f"{'.'.join(map(str, err['loc'])) or 'matchers'}: {err['msg']}"
        ) from None
    except ApiError as exc:
        raise UiError(exc.status_code, "Silence refused", str(exc.detail)) from None
    return back(f"/ui/incidents/{quote(incident_id)}", done=f"silence:{created.id}")


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
    inc = await incident_of(request, incident_id)
    wanted = "firing" if action == "ack" else None
    ids = [
        a.id
        for a in inc.alerts
        if a.open() and (wanted is None or a.state == wanted) and (not alert or a.id == alert)
    ]
    if alert and not ids:
        raise UiError(
            409, "Not done", f"alert {alert!r} is not {'firing' if wanted else 'open'} in this incident"
        )
    await _act(request, s, ids, action, by, comment)
    return back(f"/ui/incidents/{quote(incident_id)}", done=f"{action}:{len(ids)}")
