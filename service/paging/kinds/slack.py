"""``slack``: an incoming-webhook message, ``text`` (the notification fallback) and Block Kit
``blocks`` [1]_.

The webhook URL is the credential (no secret; the API shows only its host). Slack answers
429 with ``Retry-After`` when rate limited and 5xx when failing; its 4xx answers
(``invalid_payload``, ``no_service``, ``channel_not_found``, ``channel_is_archived``,
...) are permanent and not retried [1]_.

References
----------
.. [1] Slack, "Sending messages using incoming webhooks",
   https://api.slack.com/messaging/webhooks (errors and rate limits), and "Blocks",
   https://api.slack.com/reference/block-kit/blocks (header text at most 150
   characters, section text 3000, at most 10 fields of 2000).
"""

from __future__ import annotations

from typing import Any

from service.paging.kinds.base import Kind
from service.paging.payloads import Notice, example_notice, summary


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
    title = n.incident.title or n.incident.id
    tag = {"resolve": "RESOLVED", "acknowledge": "ACKNOWLEDGED"}.get(n.action, "FIRING")
    fields = [{"type": "mrkdwn",
               "text": (f"*{a.model_id}* {a.feature or '(window)'} {a.check}\n"
                        f"{a.severity}, {a.state}, effect {a.effect_size:.3g} "
                        f"(floor {a.floor:.3g})")[:2000]}
              for a in n.alerts[:10]]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": f"{tag}: {title}"[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": summary(n)[:3000]}},
    ]
    if fields:
        blocks.append({"type": "section", "fields": fields})
    shown = f"<{n.url}|{n.incident.id}>" if n.url else f"`{n.incident.id}`"
    context = f"fleetwatch · incident {shown} · receiver {n.receiver_name}"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    return {"text": summary(n), "blocks": blocks}


class Slack(Kind):
    name = "slack"
    secret_url = True
    retry_status = frozenset({429})

    def render(self, n: Notice) -> dict[str, Any]:
        return slack_body(n)


KIND = Slack()
__all__ = ["KIND", "example_notice", "slack_body"]
