"""Notifications: what happened to an incident, as one receiver sees it, and the pieces
every receiver kind's payload is built from.

A :class:`Notice` is one notification (an incident's alerts as one receiver sees them,
and what happened); each kind of :mod:`service.paging.kinds` renders it as the JSON its
destination expects. Here: the shared parts (:func:`summary`, :func:`alert_view`,
:func:`scope`, :func:`rfc3339`), the bytes sent (:func:`encode`) and the signature of
signed kinds (:func:`sign`, :func:`verify_signature`).

Actions: ``trigger`` (the first notification of an incident), ``update``
(alerts added or resolved since), ``repeat`` (a reminder while it fires),
``acknowledge`` (someone acknowledged an alert of it) and ``resolve`` (all of
its alerts resolved).

Secrets never enter a body: credentials (PagerDuty's ``routing_key``, Opsgenie's
API key) are added and signatures computed when a notification is sent
(:meth:`service.paging.kinds.base.Kind.request`), so the stored outbox
(``GET /v1/notifications``) shows bodies without credentials.

References
----------
.. [1] Stripe, "Verify webhook signatures manually",
   https://docs.stripe.com/webhooks#verify-manually, and Standard Webhooks,
   https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
   (the signed-timestamp scheme :func:`sign` follows).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

from detectors.policy.severity import highest
from service.alerting.models import Alert, IncidentRecord

Action = Literal["trigger", "update", "repeat", "acknowledge", "resolve"]
ACTIONS: tuple[str, ...] = ("trigger", "update", "repeat", "acknowledge", "resolve")
SIGNATURE_HEADER = "X-Fleetwatch-Signature"
DELIVERY_HEADER = "X-Fleetwatch-Delivery"
#: Default tolerance of :func:`verify_signature`: a signature older (or newer) than
#: this is refused, which bounds how long a captured request can be replayed.
SIGNATURE_TOLERANCE_SECONDS = 300.0


@dataclass(frozen=True)
class Notice:
    """One notification: what happened to an incident, as one receiver sees it.

    Attributes
    ----------
    action : {"trigger", "update", "repeat", "acknowledge", "resolve"}
    receiver_id, receiver_name : str
    incident : IncidentRecord
        The stored incident: ``id``, ``title``, ``group_key``, ``source``,
        ``created_at`` (Unix seconds).
    alerts : sequence of Alert
        The incident's alerts the receiver gets (notifiable and matching, or
        already notified), as ``AlertStore`` returns them, typed
        (:class:`service.alerting.models.Alert`).
    sent_at : float
        When the notification was decided, Unix seconds.
    url : str or None
        The incident's dashboard page (:func:`incident_url`), when a public URL is
        configured (``FLEETWATCH_PUBLIC_URL``); every body then links to it.
    """

    action: Action
    receiver_id: str
    receiver_name: str
    incident: IncidentRecord
    alerts: Sequence[Alert] = field(default_factory=tuple)
    sent_at: float = 0.0
    url: str | None = None

    @property
    def firing(self) -> list[Alert]:
        """The alerts still firing (acknowledged ones included)."""
        return [a for a in self.alerts if a.state != "resolved"]

    @property
    def status(self) -> str:
        """``"resolved"`` for a resolve, else ``"firing"``."""
        return "resolved" if self.action == "resolve" else "firing"

    @property
    def severity(self) -> str:
        """The highest severity of the firing alerts (of all alerts once resolved)."""
        return highest([a.severity for a in (self.firing or self.alerts)])


def incident_url(public_url: str | None, incident_id: str) -> str | None:
    """The incident's dashboard page under ``public_url`` (None when unset).

    Examples
    --------
    >>> incident_url("https://fw.example.com/", "inc1")
    'https://fw.example.com/ui/incidents/inc1'
    >>> incident_url(None, "inc1") is None
    True
    """
    if not public_url:
        return None
    return f"{public_url.rstrip('/')}/ui/incidents/{quote(incident_id, safe='')}"


def example_notice(action: Action = "trigger", url: str | None = None) -> Notice:
    """A small notice for examples: one incident of two alerts, one resolved.

    Examples
    --------
    >>> n = example_notice()
    >>> n.status, n.severity, [a.id for a in n.firing]
    ('firing', 'critical', ['a1'])
    """
    base = {"model_id": "fraud", "model_version": "3", "check": "psi", "owner": "payments", "tier": 1,
            "routing": {"team": "payments"}, "group_key": "source:payments_db", "source": "payments_db",
            "created_at": 1_714_564_800.0, "updated_at": 1_714_565_100.0, "effect_size": 0.61,
            "floor": 0.2, "p_value": 1e-9, "window_start": 1_714_564_500, "window_end": 1_714_564_800,
            "fired_window_start": 1_714_564_500, "last_window_start": 1_714_564_500, "evidence_count": 1,
            "notify": True, "incident_id": "inc1"}
    return Notice(
        action=action, receiver_id="r1", receiver_name="payments on-call",
        incident=IncidentRecord(id="inc1", title="upstream source payments_db failing",
                                group_key="source:payments_db", source="payments_db",
                                created_at=1_714_564_800.0),
        alerts=(Alert.model_validate({**base, "id": "a1", "feature": "amount", "severity": "critical",
                                      "state": "firing"}),
                Alert.model_validate({**base, "id": "a2", "feature": "country", "severity": "warning",
                                      "state": "resolved", "check": "js"})),
        sent_at=1_714_565_100.0, url=url)


def encode(body: Any) -> bytes:
    """The bytes sent (and signed): compact JSON with sorted keys, UTF-8.

    Examples
    --------
    >>> encode({"b": 1, "a": "é"})
    b'{"a":"\\xc3\\xa9","b":1}'
    """
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def rfc3339(t: float) -> str:
    """Unix seconds as an RFC 3339 UTC timestamp.

    Examples
    --------
    >>> rfc3339(1_714_564_800.25)
    '2024-05-01T12:00:00.250000Z'
    """
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def ended_at(alert: Alert) -> float | None:
    if alert.state != "resolved":
        return None
    at = alert.resolved_at or alert.updated_at or alert.created_at
    return None if at in (None, "") else float(at)


def scope(n: Notice) -> dict[str, list[str]]:
    return {"models": sorted({a.model_id for a in n.alerts}),
            "features": sorted({a.feature for a in n.alerts if a.feature}),
            "checks": sorted({a.check for a in n.alerts})}


def short_list(names: list[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" (+{len(names) - most} more)" if len(names) > most else "")


def summary(n: Notice) -> str:
    """One line for people: status, severity, title, how many alerts fire, where.

    Examples
    --------
    >>> print(summary(example_notice()))
    [FIRING critical] upstream source payments_db failing: 1 of 2 alerts firing (models fraud; checks js, psi)
    >>> print(summary(example_notice("resolve")))
    [RESOLVED] upstream source payments_db failing: 2 alerts resolved (models fraud; checks js, psi)
    """
    s = scope(n)
    where = f"(models {short_list(s['models'])}; checks {short_list(s['checks'])})"
    title = n.incident.title or n.incident.id
    if n.action == "resolve":
        return f"[RESOLVED] {title}: {len(n.alerts)} alerts resolved {where}"
    tag = "ACKNOWLEDGED" if n.action == "acknowledge" else "FIRING"
    return f"[{tag} {n.severity}] {title}: {len(n.firing)} of {len(n.alerts)} alerts firing {where}"


def alert_view(a: Alert) -> dict[str, Any]:
    ended = ended_at(a)
    return {"id": a.id, "model_id": a.model_id, "feature": a.feature, "check": a.check,
            "severity": a.severity, "state": a.state, "owner": a.owner,
            "routing": dict(a.routing), "effect_size": a.effect_size,
            "floor": a.floor, "p_value": a.p_value, "window_start": a.window_start,
            "started_at": rfc3339(float(a.created_at)),
            "ended_at": None if ended is None else rfc3339(ended),
            "acked_by": a.acked_by or None}


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The signature header value of ``body`` sent at ``timestamp``.

    ``t=<timestamp>,v1=<hex HMAC-SHA256(secret, f"{timestamp}." + body)>``:
    the timestamp is signed with the body, so a receiver that refuses old
    timestamps (:func:`verify_signature`) refuses replays [1]_.

    Parameters
    ----------
    secret : str
        The receiver's secret (UTF-8).
    body : bytes
        The exact request body.
    timestamp : int
        Unix seconds at sending.

    Examples
    --------
    The same as ``printf '1714564800.{"a":1}' | openssl dgst -sha256 -hmac 0123456789abcdef``:

    >>> sign("0123456789abcdef", b'{"a":1}', 1714564800)
    't=1714564800,v1=b98e998c5a064eacfa14830dc5eb30d85db1783efaa698387797af4e7baaf25b'
    """
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify_signature(secret: str, body: bytes, header: str | None, now: float,
                     tolerance: float = SIGNATURE_TOLERANCE_SECONDS) -> bool:
    """Whether ``header`` is a valid signature of ``body`` made within ``tolerance`` of ``now``.

    The receiver's side of :func:`sign`: parse ``t`` and every ``v1`` (there
    may be several while a secret is rotated), refuse a timestamp more than
    ``tolerance`` seconds from ``now``, recompute the HMAC over
    ``f"{t}." + body`` and compare in constant time.

    Parameters
    ----------
    secret : str
    body : bytes
        The raw request body, before any JSON parsing.
    header : str or None
        The ``X-Fleetwatch-Signature`` header.
    now : float
        The receiver's clock, Unix seconds.
    tolerance : float, default 300
        Largest accepted |now - t|, seconds.

    Returns
    -------
    bool
        False for a missing or malformed header, an old (or future) timestamp,
        another secret or a changed body.

    Examples
    --------
    >>> h = sign("0123456789abcdef", b'{"a":1}', 1714564800)
    >>> verify_signature("0123456789abcdef", b'{"a":1}', h, now=1714564900)
    True
    >>> verify_signature("0123456789abcdef", b'{"a":2}', h, now=1714564900)  # tampered
    False
    >>> verify_signature("0123456789abcdef", b'{"a":1}', h, now=1714564800 + 301)  # too old
    False
    >>> verify_signature("0123456789abcdef", b'{"a":1}', "v1=abc", now=1714564800)
    False
    """
    if not header:
        return False
    t: int | None = None
    candidates = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            t = int(value)
        elif key == "v1" and value:
            candidates.append(value)
    if t is None or not candidates or abs(now - t) > tolerance:
        return False
    expected = sign(secret, body, t).split("v1=", 1)[1]
    return any(hmac.compare_digest(expected, c) for c in candidates)
