"""Notification payloads: one incident, as each kind of receiver expects it.

Pure functions from a :class:`Notice` (an incident's alerts as one receiver
sees them, and what happened) to a JSON-able body:

=================  ==========================================================
``webhook``        :func:`webhook_body`: fleetwatch's own JSON, signed with
                   HMAC-SHA256 (:func:`sign`, :func:`verify_signature`)
``slack``          :func:`slack_body`: an incoming-webhook message, ``text``
                   (the notification fallback) and Block Kit ``blocks`` [1]_
``pagerduty``      :func:`pagerduty_event`: an Events API v2 alert event,
                   ``trigger`` / ``acknowledge`` / ``resolve`` with
                   ``dedup_key`` = the incident id [2]_
``alertmanager``   :func:`alertmanager_body`: Alertmanager's webhook payload,
                   version 4 [3]_
=================  ==========================================================

Actions: ``trigger`` (the first notification of an incident), ``update``
(alerts added or resolved since), ``repeat`` (a reminder while it fires),
``acknowledge`` (someone acknowledged an alert of it) and ``resolve`` (all of
its alerts resolved). PagerDuty has trigger, acknowledge and resolve: an update
or a repeat is a trigger with the same ``dedup_key``, which PagerDuty adds to
the open alert. Alertmanager has no acknowledgement: :func:`render` returns
None for it.

Secrets never enter a body: the PagerDuty ``routing_key`` is added and the
signature computed when a notification is sent (``service.paging.notifier``), so the
stored outbox (``GET /v1/notifications``) shows bodies without credentials.

References
----------
.. [1] Slack, "Sending messages using incoming webhooks",
   https://api.slack.com/messaging/webhooks, and "Blocks",
   https://api.slack.com/reference/block-kit/blocks (header text at most 150
   characters, section text 3000, at most 10 fields of 2000).
.. [2] PagerDuty, "Events API v2: Send an Alert Event",
   https://developer.pagerduty.com/docs/events-api-v2/trigger-events/
   (``summary`` at most 1024 characters; ``severity`` critical, error,
   warning or info; ``dedup_key`` at most 255 characters).
.. [3] Prometheus Authors, "Alertmanager configuration: <webhook_config>",
   https://prometheus.io/docs/alerting/latest/configuration/#webhook_config
.. [4] Stripe, "Verify webhook signatures manually",
   https://docs.stripe.com/webhooks#verify-manually, and Standard Webhooks,
   https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md
   (the signed-timestamp scheme :func:`sign` follows).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

from detectors.policy.severity import highest

Action = Literal["trigger", "update", "repeat", "acknowledge", "resolve"]
ACTIONS: tuple[str, ...] = ("trigger", "update", "repeat", "acknowledge", "resolve")
SIGNATURE_HEADER = "X-Fleetwatch-Signature"
DELIVERY_HEADER = "X-Fleetwatch-Delivery"
#: Default tolerance of :func:`verify_signature`: a signature older (or newer) than
#: this is refused, which bounds how long a captured request can be replayed.
SIGNATURE_TOLERANCE_SECONDS = 300.0
ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt of a firing alert
SUMMARY_MAX = 1024
SOURCE_MAX = 255


@dataclass(frozen=True)
class Notice:
    """One notification: what happened to an incident, as one receiver sees it.

    Attributes
    ----------
    action : {"trigger", "update", "repeat", "acknowledge", "resolve"}
    receiver_id, receiver_name : str
    incident : mapping
        The stored incident: ``id``, ``title``, ``group_key``, ``source``,
        ``created_at`` (Unix seconds).
    alerts : sequence of mapping
        The incident's alerts the receiver gets (notifiable and matching, or
        already notified), as ``AlertStore`` returns them.
    sent_at : float
        When the notification was decided, Unix seconds.
    url : str or None
        The incident's dashboard page (:func:`incident_url`), when a public URL is
        configured (``FLEETWATCH_PUBLIC_URL``); every body then links to it.
    """

    action: Action
    receiver_id: str
    receiver_name: str
    incident: Mapping[str, Any]
    alerts: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    sent_at: float = 0.0
    url: str | None = None

    @property
    def firing(self) -> list[Mapping[str, Any]]:
        """The alerts still firing (acknowledged ones included)."""
        return [a for a in self.alerts if a.get("state") != "resolved"]

    @property
    def status(self) -> str:
        """``"resolved"`` for a resolve, else ``"firing"``."""
        return "resolved" if self.action == "resolve" else "firing"

    @property
    def severity(self) -> str:
        """The highest severity of the firing alerts (of all alerts once resolved)."""
        return highest([a["severity"] for a in (self.firing or self.alerts)])


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
    >>> n.status, n.severity, [a["id"] for a in n.firing]
    ('firing', 'critical', ['a1'])
    """
    base = {"model_id": "fraud", "check": "psi", "owner": "payments", "routing": {"team": "payments"},
            "created_at": 1_714_564_800.0, "updated_at": 1_714_565_100.0, "effect_size": 0.61,
            "floor": 0.2, "p_value": 1e-9, "window_start": 1_714_564_500, "incident_id": "inc1"}
    return Notice(
        action=action, receiver_id="r1", receiver_name="payments on-call",
        incident={"id": "inc1", "title": "upstream source payments_db failing",
                  "group_key": "source:payments_db", "source": "payments_db",
                  "created_at": 1_714_564_800.0},
        alerts=({**base, "id": "a1", "feature": "amount", "severity": "critical", "state": "firing"},
                {**base, "id": "a2", "feature": "country", "severity": "warning", "state": "resolved",
                 "check": "js"}),
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


def _ended_at(alert: Mapping[str, Any]) -> float | None:
    if alert.get("state") != "resolved":
        return None
    at = alert.get("resolved_at") or alert.get("updated_at") or alert.get("created_at")
    return None if at in (None, "") else float(at)


def _scope(n: Notice) -> dict[str, list[str]]:
    return {"models": sorted({a["model_id"] for a in n.alerts}),
            "features": sorted({a["feature"] for a in n.alerts if a.get("feature")}),
            "checks": sorted({a["check"] for a in n.alerts})}


def _list(names: list[str], most: int = 3) -> str:
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
    scope = _scope(n)
    where = f"(models {_list(scope['models'])}; checks {_list(scope['checks'])})"
    title = n.incident.get("title") or n.incident["id"]
    if n.action == "resolve":
        return f"[RESOLVED] {title}: {len(n.alerts)} alerts resolved {where}"
    tag = "ACKNOWLEDGED" if n.action == "acknowledge" else "FIRING"
    return f"[{tag} {n.severity}] {title}: {len(n.firing)} of {len(n.alerts)} alerts firing {where}"


def _alert_view(a: Mapping[str, Any]) -> dict[str, Any]:
    ended = _ended_at(a)
    return {"id": a["id"], "model_id": a["model_id"], "feature": a.get("feature"), "check": a["check"],
            "severity": a["severity"], "state": a.get("state"), "owner": a.get("owner"),
            "routing": dict(a.get("routing") or {}), "effect_size": a.get("effect_size"),
            "floor": a.get("floor"), "p_value": a.get("p_value"), "window_start": a.get("window_start"),
            "started_at": rfc3339(float(a["created_at"])),
            "ended_at": None if ended is None else rfc3339(ended),
            "acked_by": a.get("acked_by") or None}


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
        "incident": {"id": inc["id"], "title": inc.get("title"), "group_key": inc.get("group_key"),
                     "source": inc.get("source"), "severity": n.severity, **_scope(n),
                     "created_at": rfc3339(float(inc["created_at"]))},
        "alerts": [_alert_view(a) for a in n.alerts],
        "sent_at": rfc3339(n.sent_at),
    }
    if n.url:
        body["incident"]["url"] = n.url
    return body


def slack_body(n: Notice) -> dict[str, Any]:
    """A Slack incoming-webhook message: ``text`` (fallback) and ``blocks``.

    A header (status and title, at most 150 characters), a section with the
    summary, one field per alert (at most 10, each at most 2000 characters)
    and a context line naming the incident and the receiver (linking to its dashboard
    page when a public URL is configured).

    Examples
    --------
    >>> b = slack_body(example_notice())
    >>> [blk["type"] for blk in b["blocks"]]
    ['header', 'section', 'section', 'context']
    >>> b["blocks"][0]["text"]["text"]
    'FIRING: upstream source payments_db failing'
    >>> b["blocks"][2]["fields"][0]["text"]
    '*fraud* amount psi\\ncritical, firing, effect 0.61 (floor 0.2)'
    >>> slack_body(example_notice(url="https://fw/ui/incidents/inc1"))["blocks"][-1]["elements"][0]["text"]
    'fleetwatch · incident <https://fw/ui/incidents/inc1|inc1> · receiver payments on-call'
    """
    title = n.incident.get("title") or n.incident["id"]
    tag = {"resolve": "RESOLVED", "acknowledge": "ACKNOWLEDGED"}.get(n.action, "FIRING")
    fields = [{"type": "mrkdwn",
               "text": (f"*{a['model_id']}* {a.get('feature') or '(window)'} {a['check']}\n"
                        f"{a['severity']}, {a.get('state')}, effect {a.get('effect_size'):.3g} "
                        f"(floor {a.get('floor'):.3g})")[:2000]}
              for a in n.alerts[:10]]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": f"{tag}: {title}"[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": summary(n)[:3000]}},
    ]
    if fields:
        blocks.append({"type": "section", "fields": fields})
    shown = f"<{n.url}|{n.incident['id']}>" if n.url else f"`{n.incident['id']}`"
    context = f"fleetwatch · incident {shown} · receiver {n.receiver_name}"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    return {"text": summary(n), "blocks": blocks}


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
        return {"event_action": n.action, "dedup_key": n.incident["id"]}
    scope = _scope(n)
    event: dict[str, Any] = {
        "event_action": "trigger", "dedup_key": n.incident["id"], "client": "fleetwatch",
        "payload": {
            "summary": summary(n)[:SUMMARY_MAX],
            "source": _list(scope["models"])[:SOURCE_MAX],
            "severity": n.severity,
            "timestamp": rfc3339(float(n.incident["created_at"])),
            "component": _list(scope["features"])[:SOURCE_MAX] or None,
            "group": n.incident.get("group_key"),
            "class": ", ".join(scope["checks"]),
            "custom_details": {"incident_id": n.incident["id"], "action": n.action,
                               "alerts": [_alert_view(a) for a in n.alerts]},
        },
    }
    if n.url:
        event["links"] = [{"href": n.url, "text": "fleetwatch incident"}]
    return event


def fingerprint(labels: Mapping[str, str]) -> str:
    """A stable 16-hex-digit fingerprint of a label set (SHA-256 of the sorted labels).

    Alertmanager's own fingerprint is FNV-1a; receivers treat it as opaque.

    Examples
    --------
    >>> fingerprint({"b": "2", "a": "1"}) == fingerprint({"a": "1", "b": "2"})
    True
    >>> len(fingerprint({"a": "1"}))
    16
    """
    text = "\xff".join(f"{k}\xff{v}" for k, v in sorted(labels.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _am_alert(a: Mapping[str, Any], incident_id: str, url: str | None) -> dict[str, Any]:
    labels = {str(k): str(v) for k, v in (a.get("routing") or {}).items()}
    labels.update({"alertname": a["check"], "model": a["model_id"], "feature": a.get("feature") or "",
                   "check": a["check"], "severity": a["severity"], "owner": a.get("owner") or "",
                   "incident_id": incident_id})
    labels = {k: v for k, v in labels.items() if v != ""}  # an empty label is an absent one
    ended = _ended_at(a)
    return {
        "status": "resolved" if a.get("state") == "resolved" else "firing",
        "labels": labels,
        "annotations": {"summary": f"{a['check']} on {a['model_id']} {a.get('feature') or ''}".strip(),
                        "alert_id": a["id"], "effect_size": f"{a.get('effect_size')}",
                        "floor": f"{a.get('floor')}", "p_value": f"{a.get('p_value')}"},
        "startsAt": rfc3339(float(a["created_at"])),
        "endsAt": ZERO_TIME if ended is None else rfc3339(ended),
        "generatorURL": url or "",
        "fingerprint": fingerprint(labels),
    }


def _common(dicts: list[dict[str, str]]) -> dict[str, str]:
    if not dicts:
        return {}
    return {k: v for k, v in dicts[0].items() if all(d.get(k) == v for d in dicts[1:])}


def alertmanager_body(n: Notice) -> dict[str, Any]:
    """Alertmanager's webhook payload, version 4.

    ``status`` is firing while any alert fires; ``groupKey`` is stable per
    receiver and incident; ``groupLabels`` is {incident_id}; each alert has
    ``labels`` (alertname = the check, model, feature, check, severity,
    owner, incident_id and the routing labels; empty ones left out),
    ``annotations``, ``startsAt``, ``endsAt`` (``0001-01-01T00:00:00Z``
    while firing), ``generatorURL`` (the incident's dashboard page when a public URL
    is configured, else empty) and ``fingerprint``; ``externalURL`` is the page too.

    Examples
    --------
    >>> b = alertmanager_body(example_notice())
    >>> b["version"], b["status"], b["groupKey"], b["truncatedAlerts"]
    ('4', 'firing', '{}/{receiver="r1"}:{incident_id="inc1"}', 0)
    >>> [(a["status"], a["labels"]["alertname"], a["endsAt"]) for a in b["alerts"]]
    [('firing', 'psi', '0001-01-01T00:00:00Z'), ('resolved', 'js', '2024-05-01T12:05:00Z')]
    >>> b["commonLabels"]["team"], "severity" in b["commonLabels"]
    ('payments', False)
    """
    iid = n.incident["id"]
    alerts = [_am_alert(a, iid, n.url) for a in n.alerts]
    return {
        "version": "4",
        "groupKey": f'{{}}/{{receiver="{n.receiver_id}"}}:{{incident_id="{iid}"}}',
        "truncatedAlerts": 0,
        "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
        "receiver": n.receiver_name,
        "groupLabels": {"incident_id": iid},
        "commonLabels": _common([a["labels"] for a in alerts]),
        "commonAnnotations": _common([a["annotations"] for a in alerts]),
        "externalURL": n.url or "",
        "alerts": alerts,
    }


def render(kind: str, n: Notice) -> dict[str, Any] | None:
    """The body of ``n`` for a receiver kind; None when the kind has no such
    notification (Alertmanager has no acknowledgement).

    Examples
    --------
    >>> render("alertmanager", example_notice("acknowledge")) is None
    True
    >>> render("pagerduty", example_notice("acknowledge"))["event_action"]
    'acknowledge'
    """
    if kind == "alertmanager" and n.action == "acknowledge":
        return None
    return {"webhook": webhook_body, "slack": slack_body, "pagerduty": pagerduty_event,
            "alertmanager": alertmanager_body}[kind](n)


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The signature header value of ``body`` sent at ``timestamp``.

    ``t=<timestamp>,v1=<hex HMAC-SHA256(secret, f"{timestamp}." + body)>``:
    the timestamp is signed with the body, so a receiver that refuses old
    timestamps (:func:`verify_signature`) refuses replays [4]_.

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
