"""The Redis store of the pipeline's shared state: :class:`Store`, one client for every role.

:class:`Store` is the union of six stores over one ``redis.asyncio`` client, each in its
own module: :class:`~service.profiles.models.ModelStore` (model configurations,
admission, status, deletion), :class:`~service.profiles.windows.WindowStore` (reference
and window profiles), :class:`~service.profiles.checkpoints.CheckpointStore` (aggregator
checkpoints and window-closed events), :class:`~service.profiles.results.ResultStore`
(test results), :class:`~service.profiles.fleet.FleetStore` (the fleet overview's
index) and :class:`~service.profiles.traffic.TrafficStore` (the fleet's traffic per
window). The keys are listed in :mod:`service.profiles.keys`.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict

from redis.exceptions import (
    AskError,
    ClusterDownError,
    MasterDownError,
    MovedError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.profiles.checkpoints import _ANNOUNCE, _CHECKPOINT, _PUBLISH, CheckpointStore
from service.profiles.fleet import FleetStore
from service.profiles.keys import legacy_fleet_key
from service.profiles.models import _ADMIT, _COUNT_WINDOW, ModelStore
from service.profiles.results import _PUT_LATEST, _PUT_RESULTS, COUNTS_KEPT, COUNTS_TRIM_AT, ResultStore
from service.profiles.traffic import TrafficStore
from service.profiles.windows import WindowStore
from service.runtime.redis_client import connect, is_cluster

#: Errors that mean Redis cannot serve now (down, unreachable, loading, failing over, out of
#: memory; on a cluster, a slot moving or a master failing over) rather than a wrong
#: request: the API answers them 503 with Retry-After.
UNAVAILABLE: tuple[type[Exception], ...] = (
    RedisConnectionError, RedisTimeoutError, ClusterDownError, TryAgainError, MasterDownError,
    ReadOnlyError, OutOfMemoryError, MovedError, AskError, SlotNotCoveredError,
    # the cluster client's "cannot be connected" when no node of its slot map answers
    RedisClusterException,
)


class Store(ModelStore, WindowStore, CheckpointStore, ResultStore, FleetStore, TrafficStore):
    """Async Redis access for all roles.

    Parameters
    ----------
    url : str
        ``redis://host:port/db``: the server, or any one node of a Redis Cluster.
    cluster : bool
        ``url`` is a node of a Redis Cluster (setting ``redis_cluster``);
        :func:`service.runtime.redis_client.connect`.
    """

    def __init__(self, url: str, cluster: bool = False) -> None:
        self.r = connect(url, cluster)
        self._checkpoint = self.r.register_script(_CHECKPOINT)
        self._publish = self.r.register_script(_PUBLISH)
        self._announce = self.r.register_script(_ANNOUNCE)
        self._admit = self.r.register_script(_ADMIT)
        self._count_window = self.r.register_script(_COUNT_WINDOW)
        self._put_results = self.r.register_script(
            _PUT_RESULTS.replace("COUNTS_TRIM_AT", str(COUNTS_TRIM_AT))
            .replace("COUNTS_KEPT", str(COUNTS_KEPT)))
        self._put_latest = self.r.register_script(_PUT_LATEST)
        self._traffic = OrderedDict()

    async def upgrade_key_layout(self) -> int:
        """Rename the fleet-wide keys of a Redis written before they were hash-tagged
        (``fw:models`` -> ``{fw}:models``, ``fw:alert:<id>`` -> ``{fw}:alert:<id>``, a
        model's alert index ``fw:{m}:alerts`` -> ``{fw}:alerts:<m>``, ...: everything but a
        model's other keys and the partition checkpoints); the keys renamed. Run by every
        role and the API at start; a key renamed meanwhile by another process is left to it.
        Only a standalone Redis can hold the old layout (a cluster refused it), so a cluster
        is not scanned."""
        if is_cluster(self.r):
            return 0
        n = 0
        async for raw in self.r.scan_iter(match="fw:*", count=1_000):
            key = raw.decode(errors="surrogateescape")
            new = legacy_fleet_key(key)
            if new is None:
                continue
            with contextlib.suppress(ResponseError):  # renamed by another process meanwhile
                n += bool(await self.r.renamenx(raw, new.encode(errors="surrogateescape")))
        return n

    async def close(self) -> None:
        await self.r.aclose()

    async def ping(self) -> bool:
        return bool(await self.r.ping())
