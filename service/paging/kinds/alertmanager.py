"""``alertmanager``: Alertmanager's webhook payload, version 4 [1]_.

For receivers written for Alertmanager. Alertmanager has no acknowledgement: an
``acknowledge`` renders as nothing (not sent). A secret is optional; with one,
deliveries are signed as ``webhook`` ones.

References
----------
.. [1] Prometheus Authors, "Alertmanager configuration: <webhook_config>",
   https://prometheus.io/docs/alerting/latest/configuration/#webhook_config
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from service.alerting.models import Alert
from service.paging.kinds.webhook import Signed
from service.paging.payloads import Notice, ended_at, example_notice, rfc3339

ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt of a firing alert


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


def _am_alert(a: Alert, incident_id: str, url: str | None) -> dict[str, Any]:
    labels = {str(k): str(v) for k, v in a.routing.items()}
    labels.update({"alertname": a.check, "model": a.model_id, "feature": a.feature or "",
                   "check": a.check, "severity": a.severity, "owner": a.owner or "",
                   "incident_id": incident_id})
    labels = {k: v for k, v in labels.items() if v != ""}  # an empty label is an absent one
    ended = ended_at(a)
    return {
        "status": "resolved" if a.state == "resolved" else "firing",
        "labels": labels,
        "annotations": {"summary": f"{a.check} on {a.model_id} {a.feature or ''}".strip(),
                        "alert_id": a.id, "effect_size": f"{a.effect_size}",
                        "floor": f"{a.floor}", "p_value": f"{a.p_value}"},
        "startsAt": rfc3339(float(a.created_at)),
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
    iid = n.incident.id
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


class Alertmanager(Signed):
    name = "alertmanager"
    needs = {"secret": "optional"}

    def render(self, n: Notice) -> dict[str, Any] | None:
        """None for an ``acknowledge`` (Alertmanager has none).

        Examples
        --------
        >>> KIND.render(example_notice("acknowledge")) is None
        True
        """
        if n.action == "acknowledge":
            return None
        return alertmanager_body(n)


KIND = Alertmanager()
__all__ = ["KIND", "alertmanager_body", "example_notice", "fingerprint"]
