"""The Redis store of the pipeline's shared state: :class:`Store`, one client for every role.

:class:`Store` is the union of five stores over one ``redis.asyncio`` client, each in its
own module: :class:`~service.profiles.models.ModelStore` (model configurations,
admission, status, deletion), :class:`~service.profiles.windows.WindowStore` (reference
and window profiles), :class:`~service.profiles.checkpoints.CheckpointStore` (aggregator
checkpoints and window-closed events), :class:`~service.profiles.results.ResultStore`
(test results) and :class:`~service.profiles.fleet.FleetStore` (the fleet overview's
index). The keys are listed in :mod:`service.profiles.keys`.
"""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ClusterDownError, MasterDownError, OutOfMemoryError, ReadOnlyError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.profiles.checkpoints import _CHECKPOINT, CheckpointStore
from service.profiles.fleet import _FILL_COLUMNS, FleetStore
from service.profiles.models import _ADMIT, _COUNT_WINDOW, ModelStore
from service.profiles.results import _PUT_RESULTS, COUNTS_KEPT, COUNTS_TRIM_AT, ResultStore
from service.profiles.windows import WindowStore

#: Errors that mean Redis cannot serve now (down, unreachable, loading, failing over, out of
#: memory) rather than a wrong request: the API answers them 503 with Retry-After.
UNAVAILABLE: tuple[type[Exception], ...] = (
    RedisConnectionError, RedisTimeoutError, ClusterDownError, TryAgainError, MasterDownError,
    ReadOnlyError, OutOfMemoryError,
)


class Store(ModelStore, WindowStore, CheckpointStore, ResultStore, FleetStore):
    """Async Redis access for all roles.

    Parameters
    ----------
    url : str
        ``redis://host:port/db``.
    """

    def __init__(self, url: str) -> None:
        # A dropped connection (Redis restarted, failover) is retried on a fresh one;
        # every write below is idempotent, so a retried command changes nothing.
        self.r = aioredis.Redis.from_url(
            url, socket_timeout=10, socket_connect_timeout=5,
            retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 3),
            retry_on_error=[RedisConnectionError, RedisTimeoutError],
        )
        self._checkpoint = self.r.register_script(_CHECKPOINT)
        self._admit = self.r.register_script(_ADMIT)
        self._count_window = self.r.register_script(_COUNT_WINDOW)
        self._put_results = self.r.register_script(
            _PUT_RESULTS.replace("COUNTS_TRIM_AT", str(COUNTS_TRIM_AT))
            .replace("COUNTS_KEPT", str(COUNTS_KEPT)))
        self._fill_columns = self.r.register_script(_FILL_COLUMNS)

    async def close(self) -> None:
        await self.r.aclose()

    async def ping(self) -> bool:
        return bool(await self.r.ping())
