"""The one Redis-outage policy every role follows.

While Redis cannot serve (down, unreachable, loading, failing over, read-only, out of
memory: :data:`REDIS_DOWN`), a role neither dies nor drops work: the operation that
failed is tried again, after a wait that starts at ``redis_retry_base_seconds`` and
doubles per failed attempt up to ``redis_retry_max_seconds`` (tenacity's
``wait_exponential``), for as long as the outage lasts. Each failed attempt is counted
(``fleetwatch_redis_errors_total``); the first of an outage is logged as a warning with
the role and the operation, the recovery as one info line with the outage's length.

Nothing a role has not stored is acknowledged meanwhile: the aggregator stops consuming
with its partitions' state in memory (their offsets move only with a checkpoint), the
detector leaves its window events unacknowledged, the label joiner commits no offset of a
batch it has not stored, the notifier's claims and events wait for their leases. Every
retried operation is idempotent, so an attempt that reached Redis before the connection
dropped changes nothing when it is repeated.

The Redis client's own quick retries (:class:`~service.profiles.store.Store`: three, within
about a second) absorb a dropped connection; this policy takes over beyond them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from service import metrics
from service.profiles.store import UNAVAILABLE
from service.settings import Settings

log = logging.getLogger("fleetwatch.outage")

T = TypeVar("T")

#: Errors that mean Redis cannot serve now, as a role meets them: the API's
#: :data:`~service.profiles.store.UNAVAILABLE` plus a socket error below the client.
REDIS_DOWN: tuple[type[BaseException], ...] = (*UNAVAILABLE, OSError)


class RedisOutage:
    """One role's handling of Redis outages (see the module docstring).

    Parameters
    ----------
    settings : Settings
        ``redis_retry_base_seconds``, ``redis_retry_max_seconds``.
    role : str
        The role's name, in log lines.

    Examples
    --------
    >>> import asyncio
    >>> outage = RedisOutage(Settings(redis_retry_base_seconds=0.001), "detector")
    >>> answers = iter([ConnectionRefusedError("down"), ConnectionRefusedError("down"), "ok"])
    >>> async def op():
    ...     a = next(answers)
    ...     if isinstance(a, Exception):
    ...         raise a
    ...     return a
    >>> asyncio.run(outage.call(op, "read events")), outage.failures
    ('ok', 0)
    >>> outage.delay(1), outage.delay(3), outage.delay(100)
    (0.001, 0.004, 5.0)
    """

    def __init__(self, settings: Settings, role: str) -> None:
        self.role = role
        self._wait = wait_exponential(multiplier=settings.redis_retry_base_seconds,
                                      max=settings.redis_retry_max_seconds)
        self.failures = 0  # consecutive failed attempts of the current outage (0: none)
        self.failed_total = 0  # failed attempts since the role started
        self._since = 0.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after the ``attempt``-th consecutive failure (1-based)."""
        state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
        state.attempt_number = attempt
        return float(self._wait(state))

    def failed(self, exc: BaseException, what: str) -> float:
        """Count one failed attempt of ``what``; the seconds to wait before the next."""
        metrics.REDIS_ERRORS.inc()
        self.failures += 1
        self.failed_total += 1
        if self.failures == 1:
            self._since = time.monotonic()
            log.warning("redis unavailable role=%s operation=%s (%s); retrying until it is back",
                        self.role, what, exc)
        return self.delay(self.failures)

    def recovered(self) -> None:
        """Redis answered: the next failure starts a new outage (logged once)."""
        if self.failures:
            log.info("redis back role=%s after %.1f s (%d failed attempts)", self.role,
                     time.monotonic() - self._since, self.failures)
            self.failures = 0

    async def pause(self, exc: BaseException, what: str, halt: asyncio.Event | None = None) -> None:
        """:meth:`failed`, then wait its delay (less when ``halt`` is set meanwhile), for a
        loop that tries again by itself."""
        delay = self.failed(exc, what)
        if halt is None:
            await asyncio.sleep(delay)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(halt.wait(), delay)

    async def call(self, op: Callable[[], Awaitable[T]], what: str) -> T:
        """``await op()``, tried again while Redis cannot serve, until it succeeds.

        Raises
        ------
        Exception
            Whatever ``op`` raises that is not one of :data:`REDIS_DOWN`.
        """
        async for attempt in AsyncRetrying(
            retry=retry_if_exception_type(REDIS_DOWN),
            wait=lambda rs: self.delay(rs.attempt_number),
            before_sleep=lambda rs: self.failed(rs.outcome.exception(), what),
            reraise=True,
        ):
            with attempt:
                result = await op()
        self.recovered()
        return result
