"""``pagerduty``: an Events API v2 alert event [1]_, ``trigger`` / ``acknowledge`` /
``resolve`` with ``dedup_key`` = the incident id.

PagerDuty has trigger, acknowledge and resolve: an update or a repeat is a trigger with
the same ``dedup_key``, which PagerDuty adds to the open alert. The integration's
``routing_key`` is required and added to the body when it is sent (the stored body has
none). The Events API answers 202 when accepted, 400 for an invalid event (not retried),
429 when throttled and 5xx when failing (both retried) [2]_.

References
----------
.. [1] PagerDuty, "Events API v2: Send an Alert Event",
   https://developer.pagerduty.com/docs/events-api-v2/trigger-events/
   (``summary`` at most 1024 characters; ``severity`` critical, error,
   warning or info; ``dedup_key`` at most 255 characters).
.. [2] PagerDuty, "Events API v2 Overview: Response codes & retry logic",
   https://developer.pagerduty.com/docs/events-api-v2-overview
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from service.paging.kinds.base import Delivery, Kind
from service.paging.payloads import (
    Notice,
    alert_view,
    encode,
    example_notice,
    rfc3339,
    scope,
    short_list,
    summary,
)

if TYPE_CHECKING:
    from service.paging.outbox import OutboxItem
    from service.paging.receiver_config import Receiver

#: The PagerDuty Events API v2 endpoint, the default URL of a ``pagerduty`` receiver.
PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
SUMMARY_MAX = 1024
SOURCE_MAX = 255


def pagerduty_event(n: Notice) -> dict[str, Any]:
    """A PagerDuty Events API v2 alert event, without its ``routing_key``.

    ``dedup_key`` is the incident id, so every event of an incident (trigger,
    update, repeat, acknowledge, resolve) addresses one PagerDuty alert. A
    trigger carries ``payload`` {summary (≤ 1024), source (the models,
    ≤ 255), severity, timestamp (the incident's creation), component (the
    features), group (the incident key), class (the checks), custom_details};
    acknowledge and resolve carry only the key. With a public URL a trigger
    also carries ``links`` [{href: the incident's dashboard page, text}]. The notifier
    adds ``routing_key`` when it sends.

    Examples
    --------
    >>> e = pagerduty_event(example_notice())
    >>> e["event_action"], e["dedup_key"], e["payload"]["severity"], e["payload"]["source"]
    ('trigger', 'inc1', 'critical', 'fraud')
    >>> pagerduty_event(example_notice("resolve"))
    {'event_action': 'resolve', 'dedup_key': 'inc1'}
    >>> pagerduty_event(example_notice(url="https://fw/ui/incidents/inc1"))["links"][0]["href"]
    'https://fw/ui/incidents/inc1'
    """
    if n.action in ("acknowledge", "resolve"):
        return {"event_action": n.action, "dedup_key": n.incident.id}
    s = scope(n)
    event: dict[str, Any] = {
        "event_action": "trigger", "dedup_key": n.incident.id, "client": "fleetwatch",
        "payload": {
            "summary": summary(n)[:SUMMARY_MAX],
            "source": short_list(s["models"])[:SOURCE_MAX],
            "severity": n.severity,
            "timestamp": rfc3339(float(n.incident.created_at)),
            "component": short_list(s["features"])[:SOURCE_MAX] or None,
            "group": n.incident.group_key,
            "class": ", ".join(s["checks"]),
            "custom_details": {"incident_id": n.incident.id, "action": n.action,
                               "alerts": [alert_view(a) for a in n.alerts]},
        },
    }
    if n.url:
        event["links"] = [{"href": n.url, "text": "fleetwatch incident"}]
    return event


class PagerDuty(Kind):
    name = "pagerduty"
    needs = {"routing_key": "required"}
    default_url = PAGERDUTY_EVENTS_URL
    retry_status = frozenset({429})

    def render(self, n: Notice) -> dict[str, Any]:
        return pagerduty_event(n)

    def request(self, receiver: Receiver, item: OutboxItem, now: float) -> Delivery:
        content = encode({"routing_key": receiver.routing_key, **json.loads(item.body)})
        return Delivery(receiver.url or PAGERDUTY_EVENTS_URL, content, {"Content-Type": "application/json"})


KIND = PagerDuty()
__all__ = ["KIND", "PAGERDUTY_EVENTS_URL", "example_notice", "pagerduty_event"]
