"""Receiver kinds: one module per kind of destination, registered here.

Each module holds one :class:`~service.paging.kinds.base.Kind` (its credentials and
default URL, its payload, its request, which answers it retries):

================  ==================================================================
``webhook``       fleetwatch's own JSON, HMAC-signed
``slack``         a Slack incoming-webhook message (Block Kit)
``pagerduty``     a PagerDuty Events API v2 event
``alertmanager``  Alertmanager's webhook payload, version 4 (optionally signed)
``opsgenie``      Opsgenie Alert API v2: create, acknowledge, close by alias
``teams``         a Microsoft Teams Workflows webhook message with an Adaptive Card
================  ==================================================================

Adding a kind is one module with a ``KIND`` and one entry in :data:`KINDS`.
"""

from __future__ import annotations

from typing import Any, Literal

from service.paging.kinds import alertmanager, opsgenie, pagerduty, slack, teams, webhook
from service.paging.kinds.base import CREDENTIALS, Delivery, Kind
from service.paging.payloads import Notice, example_notice  # noqa: F401 (the doctests use it)

#: Every receiver kind by name, in the order the API documents them.
KINDS: dict[str, Kind] = {k.name: k for k in (
    webhook.KIND, slack.KIND, pagerduty.KIND, alertmanager.KIND, opsgenie.KIND, teams.KIND)}
RECEIVER_KINDS: tuple[str, ...] = tuple(KINDS)
ReceiverKind = Literal[RECEIVER_KINDS]  # type: ignore[valid-type]


def kind_of(name: str) -> Kind:
    """The registered kind ``name``.

    Raises
    ------
    KeyError
        For a name that is not registered.
    """
    return KINDS[name]


def render(name: str, n: Notice) -> dict[str, Any] | None:
    """The body of ``n`` for the receiver kind ``name``; None when the kind has no such
    notification (Alertmanager has no acknowledgement).

    Examples
    --------
    >>> render("alertmanager", example_notice("acknowledge")) is None
    True
    >>> render("pagerduty", example_notice("acknowledge"))["event_action"]
    'acknowledge'
    >>> sorted(KINDS)
    ['alertmanager', 'opsgenie', 'pagerduty', 'slack', 'teams', 'webhook']
    """
    return KINDS[name].render(n)


__all__ = ["CREDENTIALS", "KINDS", "RECEIVER_KINDS", "Delivery", "Kind", "ReceiverKind", "kind_of", "render"]
