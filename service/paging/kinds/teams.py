"""``teams``: a Microsoft Teams channel message through a Workflows webhook, one Adaptive
Card [1]_ [2]_.

Teams posts to a channel from a workflow (Power Automate) started by the trigger "When a
Teams webhook request is received"; Microsoft 365 (Office 365) connectors and their
MessageCard format are retired, and workflows take Adaptive Cards only [1]_. The body is a
``message`` with one attachment of content type ``application/vnd.microsoft.card.adaptive``
whose ``content`` is the card (schema version 1.4): a header, the summary, one fact per
alert (at most 10) and a link to the incident's dashboard page when a public URL is
configured (``Action.OpenUrl``).

The workflow URL carries its own signature (``sig=``), so it is the credential: no secret,
and the API shows only its host. The workflow answers 202 when it accepted the request;
429 and 5xx are retried, other 4xx (a deleted or disabled workflow) are not.

References
----------
.. [1] Microsoft, "Create and send messages" (Teams webhooks and connectors: Workflows
   support Adaptive Cards only),
   https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/connectors-using
.. [2] Microsoft, "Adaptive Cards schema explorer" (AdaptiveCard, TextBlock, FactSet,
   Action.OpenUrl), https://adaptivecards.io/explorer/
"""

from __future__ import annotations

from typing import Any

from service.paging.kinds.base import Kind
from service.paging.payloads import Notice, summary

CARD_CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
CARD_VERSION = "1.4"
MAX_FACTS = 10


def adaptive_card(n: Notice) -> dict[str, Any]:
    """The Adaptive Card of ``n``.

    Examples
    --------
    >>> from service.paging.payloads import example_notice
    >>> card = adaptive_card(example_notice(url="https://fw/ui/incidents/inc1"))
    >>> card["type"], card["version"], [b["type"] for b in card["body"]]
    ('AdaptiveCard', '1.4', ['TextBlock', 'TextBlock', 'FactSet', 'TextBlock'])
    >>> card["body"][0]["text"], card["body"][0]["color"]
    ('FIRING: upstream source payments_db failing', 'attention')
    >>> card["body"][2]["facts"][0]
    {'title': 'fraud amount psi', 'value': 'critical, firing, effect 0.61 (floor 0.2)'}
    >>> card["actions"]
    [{'type': 'Action.OpenUrl', 'title': 'Open incident', 'url': 'https://fw/ui/incidents/inc1'}]
    """
    title = n.incident.title or n.incident.id
    tag = {"resolve": "RESOLVED", "acknowledge": "ACKNOWLEDGED"}.get(n.action, "FIRING")
    color = {"resolve": "good", "acknowledge": "accent"}.get(n.action, "attention")
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": f"{tag}: {title}", "size": "Large", "weight": "Bolder",
         "color": color, "wrap": True},
        {"type": "TextBlock", "text": summary(n), "wrap": True},
    ]
    facts = [{"title": f"{a.model_id} {a.feature or '(window)'} {a.check}",
              "value": f"{a.severity}, {a.state}, effect {a.effect_size:.3g} "
                       f"(floor {a.floor:.3g})"}
             for a in n.alerts[:MAX_FACTS]]
    if facts:
        body.append({"type": "FactSet", "facts": facts})
    body.append({"type": "TextBlock", "text": f"fleetwatch · incident {n.incident.id} · receiver "
                                              f"{n.receiver_name}", "isSubtle": True, "size": "Small",
                 "wrap": True})
    card: dict[str, Any] = {"$schema": CARD_SCHEMA, "type": "AdaptiveCard", "version": CARD_VERSION,
                            "body": body}
    if n.url:
        card["actions"] = [{"type": "Action.OpenUrl", "title": "Open incident", "url": n.url}]
    return card


def teams_body(n: Notice) -> dict[str, Any]:
    """The workflow webhook's request body: a ``message`` with the card as its one attachment.

    Examples
    --------
    >>> from service.paging.payloads import example_notice
    >>> b = teams_body(example_notice())
    >>> b["type"], [(a["contentType"], a["contentUrl"]) for a in b["attachments"]]
    ('message', [('application/vnd.microsoft.card.adaptive', None)])
    >>> b["attachments"][0]["content"]["type"]
    'AdaptiveCard'
    """
    return {"type": "message",
            "attachments": [{"contentType": CARD_CONTENT_TYPE, "contentUrl": None,
                             "content": adaptive_card(n)}]}


class Teams(Kind):
    name = "teams"
    secret_url = True
    retry_status = frozenset({429})

    def render(self, n: Notice) -> dict[str, Any]:
        return teams_body(n)


KIND = Teams()
__all__ = ["KIND", "adaptive_card", "teams_body"]
