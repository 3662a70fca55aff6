"""The Redis keys of paging: every key this package writes.

Keys (outbox: :mod:`service.paging.outbox`; groups: :mod:`service.paging.notifier`;
receivers: :mod:`service.paging.receiver_store`):

===============================  ==================================================
``{fw}:outbox:item:{id}``        HASH one notification: ``receiver_id``,
                                 ``receiver_kind``, ``incident_id``, ``action``,
                                 ``body`` (JSON, without credentials), ``state``
                                 (pending | delivered | dead), ``attempts``,
                                 ``created_at``, ``due``, ``last_error``,
                                 ``finished_at``, ``lease`` (the claim's token)
``{fw}:outbox:due``              ZSET ids ready to send, by due time (Unix s); a
                                 claim moves its items to the lease's end
``{fw}:outbox:q:{receiver}:{inc}`` LIST pending ids of one receiver and incident, in
                                 order; only the head is in ``{fw}:outbox:due``, so
                                 a resolve never overtakes its trigger
``{fw}:outbox:pending``          ZSET pending ids by creation time
``{fw}:outbox:delivered``,       ZSET finished ids by finishing time (the newest
``{fw}:outbox:dead``             ``keep`` kept; their hashes expire after
                                 ``retention``)
``{fw}:outbox:incident:{inc}``   ZSET every notification of one incident, by
                                 creation time (the incident page's log), written
                                 with the item; it expires ``retention`` after the
                                 last of them finished, like their hashes
``{fw}:ratelimit:{receiver}``    ZSET the receiver's sends in the last window
``{fw}:notify:{receiver}:{inc}``   HASH one (receiver, incident) group's notification state
``{fw}:notify:due``              ZSET groups due for a flush, by due time
``{fw}:receivers``               HASH receiver id -> JSON receiver
===============================  ==================================================
"""

from __future__ import annotations

from service.profiles.keys import GLOBAL

ITEM_PREFIX = f"{GLOBAL}outbox:item:"
OUTBOX_DUE = f"{GLOBAL}outbox:due"
GROUPS_DUE = f"{GLOBAL}notify:due"
RECEIVERS = f"{GLOBAL}receivers"


def outbox_index_key(state: str) -> str:
    """ZSET of the outbox items in ``state`` (pending, delivered, dead)."""
    return f"{GLOBAL}outbox:{state}"


def outbox_queue_key(receiver_id: str, incident_id: str) -> str:
    return f"{GLOBAL}outbox:q:{receiver_id}:{incident_id}"


def incident_index_key(incident_id: str) -> str:
    """ZSET of an incident's notifications by creation time."""
    return f"{GLOBAL}outbox:incident:{incident_id}"


def ratelimit_key(receiver_id: str) -> str:
    return f"{GLOBAL}ratelimit:{receiver_id}"


def notify_group_key(receiver_id: str, incident_id: str) -> str:
    """The HASH of one (receiver, incident) group's notification state.

    Examples
    --------
    >>> notify_group_key("oncall", "9a7b")
    '{fw}:notify:oncall:9a7b'
    """
    return f"{GLOBAL}notify:{receiver_id}:{incident_id}"
