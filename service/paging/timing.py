"""When a receiver is notified of an incident: Alertmanager's grouping timing, as a pure
decision.

:func:`decide` takes what a receiver was told so far about one incident
(:class:`GroupState`), the incident's alerts now and the receiver's :class:`Timing`
(``group_wait``, ``group_interval``, ``repeat_interval`` [1]_), and says what to send now
and when to look again. No clock and no I/O: the notifier (:mod:`service.paging.notifier`)
keeps the state in Redis and calls it whenever the group changes or falls due.

References
----------
.. [1] Prometheus Authors, "Alertmanager configuration: <route>" (group_wait,
   group_interval, repeat_interval),
   https://prometheus.io/docs/alerting/latest/configuration/#route
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from service.alerting.models import Alert

if TYPE_CHECKING:
    from service.paging.receiver_config import Receiver


@dataclass(frozen=True)
class Timing:
    """A receiver's timing (seconds): Alertmanager's group_wait, group_interval and
    repeat_interval."""

    group_wait: float
    group_interval: float
    repeat_interval: float

    @classmethod
    def of(cls, r: Receiver) -> Timing:
        return cls(r.group_wait_seconds, r.group_interval_seconds, r.repeat_interval_seconds)


@dataclass(frozen=True)
class GroupState:
    """What a receiver was told about an incident.

    Attributes
    ----------
    first_seen : float
        When the group's first alert arrived (Unix seconds).
    sent : {"none", "firing", "resolved"}
        The last status notified.
    last_sent : float or None
        When the last notification was decided.
    firing : tuple of str
        Ids of the alerts firing in the last notification.
    acked : bool
        Whether the acknowledgement was forwarded (since the last trigger).
    members : tuple of str
        Ids of every alert notified so far (their resolution is reported even
        if they stopped matching or became not-to-notify).
    """

    first_seen: float
    sent: str = "none"
    last_sent: float | None = None
    firing: tuple[str, ...] = ()
    acked: bool = False
    members: tuple[str, ...] = ()

    @classmethod
    def from_redis(cls, raw: Mapping[bytes, bytes]) -> GroupState:
        f = {k.decode(): v.decode() for k, v in raw.items()}
        return cls(first_seen=float(f["first_seen"]), sent=f.get("sent", "none"),
                   last_sent=float(f["last_sent"]) if f.get("last_sent") else None,
                   firing=tuple(x for x in f.get("firing", "").split(",") if x),
                   acked=f.get("acked") == "1",
                   members=tuple(x for x in f.get("members", "").split(",") if x))

    def to_redis(self) -> dict[str, str]:
        return {"first_seen": repr(self.first_seen), "sent": self.sent,
                "last_sent": "" if self.last_sent is None else repr(self.last_sent),
                "firing": ",".join(self.firing), "acked": "1" if self.acked else "0",
                "members": ",".join(self.members)}


@dataclass(frozen=True)
class Decision:
    """What to send now, the state after it, and when to look again (None: only
    when an event arrives)."""

    actions: tuple[str, ...]
    state: GroupState
    next_at: float | None


def decide(state: GroupState, alerts: Sequence[Alert], timing: Timing,
           now: float) -> Decision:
    """The notifications one receiver gets for one incident at ``now``.

    Parameters
    ----------
    state : GroupState
        What the receiver was told so far.
    alerts : sequence of Alert
        The incident's alerts the receiver gets (notifiable and matching, or
        already notified); their ``id`` and ``state`` (firing, acknowledged,
        resolved) decide.
    timing : Timing
    now : float
        Unix seconds.

    Returns
    -------
    Decision

    Notes
    -----
    Nothing sent yet (or the last notice was a resolve): once an alert fires
    and ``group_wait`` has passed since the first (``group_interval`` since a
    resolve), a ``trigger`` with every alert of the group. An incident whose
    alerts all resolved before that is never notified. After a trigger:

    - the firing set changed: an ``update``, no sooner than
      ``group_interval`` after the last notification;
    - nothing fires any more: a ``resolve``, with the same spacing;
    - unchanged: a ``repeat`` every ``repeat_interval``, unless acknowledged;
    - an alert acknowledged: one ``acknowledge``, at once (after the trigger
      or update of the same flush).

    Examples
    --------
    >>> t = Timing(group_wait=30, group_interval=300, repeat_interval=3600)
    >>> s = GroupState(first_seen=0.0)
    >>> def of(*states):  # the incident's alerts a and b, only their id and state
    ...     return [Alert.model_construct(id=i, state=st) for i, st in zip("ab", states, strict=True)]
    >>> firing = of("firing", "firing")
    >>> decide(s, firing, t, 10).actions, decide(s, firing, t, 10).next_at  # group_wait
    ((), 30.0)
    >>> d = decide(s, firing, t, 30)
    >>> d.actions, d.state.firing, d.next_at
    (('trigger',), ('a', 'b'), 3630)
    >>> resolved = of("resolved", "resolved")
    >>> decide(d.state, resolved, t, 100).next_at  # group_interval after the trigger
    330
    >>> r = decide(d.state, resolved, t, 330)
    >>> r.actions, r.state.sent, r.next_at
    (('resolve',), 'resolved', None)
    >>> acked = of("acknowledged", "firing")
    >>> decide(d.state, acked, t, 40).actions  # no repeats while acknowledged
    ('acknowledge',)
    >>> decide(d.state, firing, t, 3630).actions
    ('repeat',)
    >>> decide(s, resolved, t, 30).actions  # resolved before group_wait: never notified
    ()
    """
    ids = tuple(sorted({a.id for a in alerts} | set(state.members)))
    firing = tuple(sorted(a.id for a in alerts if a.open()))
    acked = any(a.state == "acknowledged" for a in alerts)
    if state.sent != "firing":
        if not firing:
            return Decision((), state, None)
        ready = (state.first_seen + timing.group_wait if state.sent == "none" or state.last_sent is None
                 else state.last_sent + timing.group_interval)
        if now < ready:
            return Decision((), state, ready)
        new = GroupState(state.first_seen, "firing", now, firing, acked, ids)
        return Decision(("trigger", "acknowledge") if acked else ("trigger",), new,
                        None if acked else now + timing.repeat_interval)
    last = state.last_sent if state.last_sent is not None else state.first_seen
    if not firing:
        if now < last + timing.group_interval:
            return Decision((), state, last + timing.group_interval)
        return Decision(("resolve",), replace(state, sent="resolved", last_sent=now, firing=(),
                                              members=ids), None)
    actions: list[str] = []
    later: list[float] = []
    new = state
    if firing != state.firing:
        if now >= last + timing.group_interval:
            actions.append("update")
            new = replace(new, last_sent=now, firing=firing, members=ids)
        else:
            later.append(last + timing.group_interval)
    elif not state.acked and not acked and now >= last + timing.repeat_interval:
        actions.append("repeat")
        new = replace(new, last_sent=now, members=ids)
    if acked and not state.acked:
        actions.append("acknowledge")
        new = replace(new, acked=True)
    if not new.acked:
        later.append((new.last_sent or now) + timing.repeat_interval)
    return Decision(tuple(actions), new, min(later) if later else None)
