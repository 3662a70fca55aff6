"""``webhook``: fleetwatch's own JSON, signed with HMAC-SHA256.

The generic receiver: any HTTP endpoint that verifies the ``X-Fleetwatch-Signature``
header (:func:`service.paging.payloads.verify_signature`). A secret is required.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from service.paging.kinds.base import Delivery, Kind
from service.paging.payloads import (
    SIGNATURE_HEADER,
    Notice,
    alert_view,
    example_notice,
    rfc3339,
    scope,
    sign,
    summary,
)

if TYPE_CHECKING:
    from service.paging.outbox import OutboxItem
    from service.paging.receiver_config import Receiver


def webhook_body(n: Notice) -> dict[str, Any]:
    """fleetwatch's generic webhook JSON (version ``"1"``).

    Fields: ``version``, ``action``, ``status`` (firing | resolved),
    ``summary``, ``receiver`` {id, name}, ``incident`` {id, title, group_key,
    source, severity, models, features, checks, created_at}, ``alerts`` (id,
    model_id, feature, check, severity, state, owner, routing, effect_size,
    floor, p_value, window_start, started_at, ended_at, acked_by) and
    ``sent_at``; with a public URL, ``incident.url`` (the incident's dashboard page).
    Sent as :func:`encode` bytes, signed (:func:`sign`).

    Examples
    --------
    >>> b = webhook_body(example_notice())
    >>> b["action"], b["status"], b["incident"]["id"], [a["state"] for a in b["alerts"]]
    ('trigger', 'firing', 'inc1', ['firing', 'resolved'])
    >>> b["alerts"][1]["ended_at"]
    '2024-05-01T12:05:00Z'
    >>> webhook_body(example_notice(url="https://fw.example.com/ui/incidents/inc1"))["incident"]["url"]
    'https://fw.example.com/ui/incidents/inc1'
    """
    inc = n.incident
    body = {
        "version": "1", "action": n.action, "status": n.status, "summary": summary(n),
        "receiver": {"id": n.receiver_id, "name": n.receiver_name},
        "incident": {"id": inc.id, "title": inc.title, "group_key": inc.group_key,
                     "source": inc.source, "severity": n.severity, **scope(n),
                     "created_at": rfc3339(float(inc.created_at))},
        "alerts": [alert_view(a) for a in n.alerts],
        "sent_at": rfc3339(n.sent_at),
    }
    if n.url:
        body["incident"]["url"] = n.url
    return body


class Signed(Kind):
    """A kind whose deliveries carry the HMAC signature header when a secret is set."""

    def request(self, receiver: Receiver, item: OutboxItem, now: float) -> Delivery:
        d = super().request(receiver, item, now)
        if receiver.secret:
            d.headers[SIGNATURE_HEADER] = sign(receiver.secret, d.content, int(now))
        return d


class Webhook(Signed):
    name = "webhook"
    needs = {"secret": "required"}

    def render(self, n: Notice) -> dict[str, Any]:
        return webhook_body(n)


KIND = Webhook()
__all__ = ["KIND", "Signed", "example_notice", "webhook_body"]
