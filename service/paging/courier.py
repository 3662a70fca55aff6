"""One delivery attempt of an outbox item: the receiver's rate limit (deferred, not
dropped), the SSRF guard again, an HTTP POST with the receiver kind's request, then
delivered, retried later (tenacity's backoff, stored as the due time, never earlier than
the receiver's ``Retry-After``) or dead-lettered."""

from __future__ import annotations

import contextlib
import email.utils
import logging
import time

import httpx

from service import metrics
from service.paging.kinds import Delivery, kind_of
from service.paging.outbox import Outbox, OutboxItem, RetryPolicy
from service.paging.payloads import DELIVERY_HEADER
from service.paging.receiver_config import Receiver
from service.paging.receiver_store import ReceiverStore
from service.paging.ssrf import UnsafeUrl, check_url
from service.settings import Settings

log = logging.getLogger("fleetwatch.notifier")


def retry_after(response: httpx.Response, now: float) -> float:
    """Seconds the receiver asked to wait (``Retry-After``: seconds or an HTTP date)."""
    value = response.headers.get("retry-after")
    if not value:
        return 0.0
    if value.strip().isdigit():
        return float(value)
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - now)
    return 0.0


class Courier:
    """Delivers claimed outbox items over ``http`` (set by the notifier while it runs).

    Parameters
    ----------
    settings : Settings
        ``notifier_max_attempts``, ``notifier_backoff_*`` and ``receiver_allow_nets``.
    receivers : ReceiverStore
    outbox : Outbox
    rate_window_seconds : float
        The window of a receiver's ``max_per_minute``.
    """

    def __init__(self, settings: Settings, receivers: ReceiverStore, outbox: Outbox,
                 rate_window_seconds: float) -> None:
        self.settings = settings
        self.receivers = receivers
        self.outbox = outbox
        self.retry = RetryPolicy(settings.notifier_max_attempts, settings.notifier_backoff_base_seconds,
                                 settings.notifier_backoff_max_seconds)
        self.rate_window = rate_window_seconds
        self.http: httpx.AsyncClient | None = None

    def request(self, receiver: Receiver, item: OutboxItem, now: float) -> Delivery:
        """The request of one attempt, as the receiver's kind builds it (credentials added
        here, never stored), with the delivery id header."""
        d = kind_of(receiver.kind).request(receiver, item, now)
        d.headers[DELIVERY_HEADER] = item.id
        return d

    async def deliver(self, item: OutboxItem, token: str) -> str:
        """One attempt at a claimed item; its outcome (delivered, retried, dead,
        rate_limited)."""
        assert self.http is not None, "deliver() runs inside run()"
        kind = item.receiver_kind
        now = time.time()
        receiver = await self.receivers.get(item.receiver_id)
        if receiver is None:
            return await self._dead(item, token, item.attempts, "receiver deleted")
        free_at = await self.outbox.take_slot(receiver.id, receiver.max_per_minute, self.rate_window, now,
                                              f"{item.id}:{token}")
        if free_at is not None:
            await self.outbox.later(item, token, free_at, item.attempts,
                                    f"rate limited: {receiver.max_per_minute} per minute")
            metrics.NOTIFICATIONS.labels(receiver_kind=kind, outcome="rate_limited").inc()
            log.info("notification deferred receiver=%s incident=%s id=%s until=%.3f",
                     receiver.id, item.incident_id, item.id, free_at)
            return "rate_limited"
        attempts = item.attempts + 1
        wait_at_least = 0.0
        try:
            d = self.request(receiver, item, now)
            await check_url(d.url, self.settings.receiver_allow_nets)
            response = await self.http.post(d.url, content=d.content, headers=d.headers)
        except UnsafeUrl as exc:
            return await self._dead(item, token, attempts, f"url refused: {exc}")
        except (httpx.HTTPError, OSError) as exc:
            error, retryable = f"{type(exc).__name__}: {exc}", True
        else:
            if response.is_success:
                if not await self.outbox.finish(item, token, "delivered", time.time(), attempts):
                    log.warning("delivered after losing the lease id=%s", item.id)
                metrics.NOTIFICATIONS.labels(receiver_kind=kind, outcome="delivered").inc()
                log.info("notification delivered receiver=%s kind=%s incident=%s action=%s id=%s "
                         "attempts=%d", receiver.id, kind, item.incident_id, item.action, item.id, attempts)
                return "delivered"
            code = response.status_code
            error = f"HTTP {code}"
            retryable = kind_of(receiver.kind).retryable(code)
            wait_at_least = retry_after(response, now)
        if not retryable or self.retry.exhausted(attempts):
            return await self._dead(item, token, attempts, error)
        due = time.time() + max(self.retry.delay(attempts), wait_at_least)
        await self.outbox.later(item, token, due, attempts, error)
        metrics.NOTIFICATIONS.labels(receiver_kind=kind, outcome="retried").inc()
        log.info("notification retried receiver=%s incident=%s id=%s attempts=%d error=%s",
                 item.receiver_id, item.incident_id, item.id, attempts, error)
        return "retried"

    async def _dead(self, item: OutboxItem, token: str, attempts: int, error: str) -> str:
        await self.outbox.finish(item, token, "dead", time.time(), attempts, error)
        metrics.NOTIFICATIONS.labels(receiver_kind=item.receiver_kind, outcome="dead").inc()
        log.warning("notification dead-lettered receiver=%s incident=%s action=%s id=%s attempts=%d "
                    "reason=%s", item.receiver_id, item.incident_id, item.action, item.id, attempts, error)
        return "dead"
