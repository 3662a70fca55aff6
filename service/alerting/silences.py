"""Redis store of silences.

Key layout:

==================  ===============================================
``{fw}:silences``   HASH silence id -> JSON :class:`Silence`
==================  ===============================================

Silences are few (people create them), so every read loads the hash and
filters in memory. :func:`muted_now` is the one rule of whether an alert is
silenced: the active silences matching its labels *now*. Every read of an
alert applies it (``service.alerting.store.AlertStore``), so the API, the
dashboard and the notifier see a silence from the moment it is created, not
from the alert's next window. Expired silences stay visible for ``retention`` (7 days by
default) and are purged when a silence is created, so the hash is bounded by
the silences created or ended in that time.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from detectors.policy.silence import (
    STORED_CONTEXT,
    Silence,
    SilenceSpec,
    SilenceState,
    as_utc,
    expire,
    new_silence,
    silencing,
)
from service.alerting.keys import SILENCES
from service.alerting.models import Alert
from service.runtime.redis_client import Client
from service.stored import Unreadable, encode_stored, read_stored

if TYPE_CHECKING:
    from service.paging.receiver_config import Receiver

STORED = {STORED_CONTEXT: True}  # the validation context of stored silences and receivers
RETENTION = timedelta(days=7)

log = logging.getLogger(__name__)


M = TypeVar("M", Silence, "Receiver")


def alert_labels(alert: Alert) -> dict[str, str | None]:
    """The labels silence matchers compare: model, feature, check, severity, owner.

    Examples
    --------
    >>> alert_labels(Alert.model_construct(model_id="fraud", feature="amount", check="psi",
    ...                                    severity="critical", owner=None))["model"]
    'fraud'
    """
    return {"model": alert.model_id, "feature": alert.feature, "check": alert.check,
            "severity": alert.severity, "owner": alert.owner}


def muted_now(alert: Alert, silences: list[Silence], now: datetime | float) -> Alert:
    """``alert`` with ``silenced_by`` (the ids of the silences in ``silences`` active at
    ``now`` that match its labels, in input order) and ``notify`` (neither inhibited nor
    silenced: whether it may page) as they stand at ``now``.

    A silence created after the alert fired mutes it at once; one that expired no
    longer does. The alert policy records the same two fields when it writes an alert,
    by this rule; a read replaces them with their value now.

    Examples
    --------
    >>> s = Silence(id="s1", created_at=0, starts_at=100, ends_at=200, created_by="ana",
    ...             comment="c", matchers=[{"name": "model", "value": "fraud"}])
    >>> a = Alert.model_construct(model_id="fraud", feature="amount", check="psi", owner=None,
    ...                           severity="warning", inhibited_by=[], silenced_by=[], notify=True)
    >>> [(m.silenced_by, m.notify) for m in (muted_now(a, [s], t) for t in (50, 150, 200))]
    [([], True), (['s1'], False), ([], True)]
    """
    silenced = silencing(silences, alert_labels(alert), now)
    return alert.model_copy(update={"silenced_by": silenced,
                                    "notify": not alert.inhibited_by and not silenced})


def read_matching(cls: type[M], key: bytes | str, raw: bytes, *, role: str, kind: str) -> M | None:
    """A stored silence or receiver (``cls``), or None when it does not parse (logged and
    counted by :func:`service.stored.read_stored`). One whose regular expression RE2 refuses
    (written by an earlier release) reads back with that matcher unusable: it matches
    nothing, and this is logged.
    """
    name = key.decode() if isinstance(key, bytes) else key
    value = read_stored(cls, raw, role=role, kind=kind, key=name, context=STORED)
    if isinstance(value, Unreadable):
        return None
    if not all(m.usable for m in value.matchers):
        log.warning("%s %r has a regular expression RE2 cannot run: it matches nothing "
                    "(recreate it in RE2 syntax)", kind, name)
    return value


class SilenceStore:
    """Create, read and expire silences in Redis.

    Parameters
    ----------
    r : service.runtime.redis_client.Client
        The client (``Store.r``).
    retention : timedelta
        How long an expired silence stays visible before it is purged.
    """

    def __init__(self, r: Client, retention: timedelta = RETENTION, role: str = "api") -> None:
        self.r = r
        self.retention = retention
        self.role = role

    def _read(self, key: bytes | str, raw: bytes) -> Silence | None:
        """A stored silence; an unreadable one is logged, counted and skipped."""
        return read_matching(Silence, key, raw, role=self.role, kind="silence")

    async def _all(self) -> list[Silence]:
        read = (self._read(k, raw) for k, raw in (await self.r.hgetall(SILENCES)).items())
        return [s for s in read if s is not None]

    async def create(self, spec: SilenceSpec, now: datetime | float) -> Silence:
        """Store a new silence (id: a random uuid4 hex) and purge long-expired ones.

        Raises
        ------
        ValueError
            When ``spec.ends_at`` is not after the start (see
            :func:`detectors.policy.silence.new_silence`).
        """
        silence = new_silence(spec, uuid.uuid4().hex, now)
        horizon = as_utc(now) - self.retention
        stale = [s.id for s in await self._all() if s.ends_at < horizon]
        async with self.r.pipeline(transaction=True) as p:
            if stale:
                p.hdel(SILENCES, *stale)
            p.hset(SILENCES, silence.id, encode_stored(silence, context=STORED))
            await p.execute()
        if stale:
            log.info("purged %d silences expired before %s", len(stale), horizon.isoformat())
        return silence

    async def get(self, silence_id: str) -> Silence | None:
        raw = await self.r.hget(SILENCES, silence_id)
        return None if raw is None else self._read(silence_id, raw)

    async def list(self, state: SilenceState | None, now: datetime | float) -> list[Silence]:
        """Silences (only those in ``state`` at ``now`` if given), newest first."""
        silences = [s for s in await self._all() if state is None or s.state(now) == state]
        return sorted(silences, key=lambda s: (s.created_at, s.id), reverse=True)

    async def expire(self, silence_id: str, now: datetime | float) -> Silence | None:
        """End a silence at ``now`` (an expired one is left as it is); None if unknown."""
        silence = await self.get(silence_id)
        if silence is None:
            return None
        ended = expire(silence, now)
        if ended != silence:
            await self.r.hset(SILENCES, silence_id, encode_stored(ended, context=STORED))
        return ended

    async def active(self, now: datetime | float) -> list[Silence]:
        """The silences active at ``now``, newest first (for :func:`silencing`)."""
        return await self.list("active", now)
