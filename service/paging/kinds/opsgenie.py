"""``opsgenie``: Opsgenie's Alert API v2 [1]_: create, acknowledge and close one alert per
incident.

The incident id is the alert's ``alias`` (Opsgenie's deduplication key: while an alert
with that alias is open, a create adds to it), so a ``trigger``, ``update`` or ``repeat``
is a create with the same alias, an ``acknowledge`` acknowledges it and a ``resolve``
closes it, both addressed by alias (``/{alias}/acknowledge?identifierType=alias``,
``/{alias}/close?identifierType=alias``). Opsgenie has no severity but a priority: P1 for
critical, P3 for warning, P5 for info.

The receiver's ``api_key`` is the key of an Opsgenie API integration, required and sent as
``Authorization: GenieKey <key>`` (never stored in a body). Its URL defaults to
``https://api.opsgenie.com/v2/alerts``; an EU account sets
``https://api.eu.opsgenie.com/v2/alerts``. Requests are processed asynchronously: the API
answers 202 with a request id; 429 (rate limited) and 5xx are retried, other 4xx (bad
key, invalid request) are not.

Field limits [1]_: ``message`` 130 characters, ``alias`` 512, ``description`` 15,000,
``entity`` 512, ``source`` 100, at most 20 ``tags`` of 50, ``note`` 25,000.

References
----------
.. [1] Atlassian, "Opsgenie Alert API": Create Alert (``POST /v2/alerts``), Acknowledge
   Alert and Close Alert (``POST /v2/alerts/{identifier}/acknowledge`` and ``/close``,
   ``identifierType=alias``), https://docs.opsgenie.com/docs/alert-api
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from service.alerting.models import Alert
from service.paging.kinds.base import Delivery, Kind
from service.paging.payloads import Notice, scope, short_list, summary

if TYPE_CHECKING:
    from service.paging.outbox import OutboxItem
    from service.paging.receiver_config import Receiver

OPSGENIE_ALERTS_URL = "https://api.opsgenie.com/v2/alerts"
PRIORITY = {"critical": "P1", "warning": "P3", "info": "P5"}
MESSAGE_MAX, ALIAS_MAX, DESCRIPTION_MAX, ENTITY_MAX, SOURCE_MAX = 130, 512, 15_000, 512, 100
TAGS_MAX, TAG_MAX, NOTE_MAX = 20, 50, 25_000
SOURCE = "fleetwatch"


def _alert_line(a: Alert) -> str:
    return (f"- {a.model_id} {a.feature or '(window)'} {a.check}: {a.severity}, "
            f"{a.state}, effect {a.effect_size:.3g} (floor {a.floor:.3g})")


def opsgenie_body(n: Notice) -> dict[str, Any]:
    """The Alert API v2 request body of ``n``, without the API key.

    A create (``trigger``, ``update``, ``repeat``): ``message`` (severity and title),
    ``alias`` (the incident id), ``description`` (the summary and one line per alert),
    ``priority``, ``entity`` (the models), ``source``, ``tags`` (fleetwatch, the severity,
    the checks) and ``details`` (string values: incident id, group key, source, models,
    features, checks, action; the dashboard URL when a public URL is configured). An
    acknowledge or a close: ``source`` and ``note`` (the summary).

    Examples
    --------
    >>> from service.paging.payloads import example_notice
    >>> b = opsgenie_body(example_notice())
    >>> b["alias"], b["priority"], b["message"]
    ('inc1', 'P1', '[critical] upstream source payments_db failing')
    >>> b["tags"], b["details"]["models"]
    (['fleetwatch', 'severity:critical', 'js', 'psi'], 'fraud')
    >>> print(b["description"].splitlines()[1])
    - fraud amount psi: critical, firing, effect 0.61 (floor 0.2)
    >>> opsgenie_body(example_notice("resolve"))["source"]
    'fleetwatch'
    """
    if n.action in ("acknowledge", "resolve"):
        return {"source": SOURCE, "note": summary(n)[:NOTE_MAX]}
    s = scope(n)
    title = n.incident.title or n.incident.id
    details = {"incident_id": n.incident.id, "group_key": n.incident.group_key or "",
               "source": n.incident.source or "", "models": ", ".join(s["models"]),
               "features": ", ".join(s["features"]), "checks": ", ".join(s["checks"]), "action": n.action}
    if n.url:
        details["url"] = n.url
    description = "\n".join([summary(n), *(_alert_line(a) for a in n.alerts)])
    return {
        "message": f"[{n.severity}] {title}"[:MESSAGE_MAX],
        "alias": n.incident.id[:ALIAS_MAX],
        "description": description[:DESCRIPTION_MAX],
        "priority": PRIORITY.get(n.severity, "P3"),
        "entity": short_list(s["models"])[:ENTITY_MAX],
        "source": SOURCE,
        "tags": [t[:TAG_MAX] for t in [SOURCE, f"severity:{n.severity}", *s["checks"]]][:TAGS_MAX],
        "details": details,
    }


def opsgenie_url(base: str, action: str, alias: str) -> str:
    """Where one action goes: creates to ``base``, acknowledge and close to the alert by alias.

    Examples
    --------
    >>> opsgenie_url(OPSGENIE_ALERTS_URL, "trigger", "inc1")
    'https://api.opsgenie.com/v2/alerts'
    >>> opsgenie_url(OPSGENIE_ALERTS_URL, "resolve", "inc/1")
    'https://api.opsgenie.com/v2/alerts/inc%2F1/close?identifierType=alias'
    """
    verb = {"acknowledge": "acknowledge", "resolve": "close"}.get(action)
    if verb is None:
        return base
    return f"{base.rstrip('/')}/{quote(alias, safe='')}/{verb}?identifierType=alias"


class Opsgenie(Kind):
    name = "opsgenie"
    needs = {"api_key": "required"}
    default_url = OPSGENIE_ALERTS_URL
    retry_status = frozenset({429})

    def render(self, n: Notice) -> dict[str, Any]:
        return opsgenie_body(n)

    def request(self, receiver: Receiver, item: OutboxItem, now: float) -> Delivery:
        """The create, acknowledge or close request (the alert addressed by its alias, the
        incident id), the API key in ``Authorization``."""
        url = opsgenie_url(receiver.url or OPSGENIE_ALERTS_URL, item.action, item.incident_id)
        return Delivery(url, item.body.encode(), {"Content-Type": "application/json",
                                                  "Authorization": f"GenieKey {receiver.api_key}"})


KIND = Opsgenie()
__all__ = ["KIND", "OPSGENIE_ALERTS_URL", "opsgenie_body", "opsgenie_url"]
