"""The one way a role opens Redis: a standalone server or a Redis Cluster, by a setting.

``redis_cluster`` (``FLEETWATCH_REDIS_CLUSTER``) false: ``redis_url`` names one Redis
server (``redis.asyncio.Redis``). True: it names any one node of a Redis Cluster, and the
client (``redis.asyncio.cluster.RedisCluster``) discovers the others, routes every command
by its key's hash slot and follows ``MOVED``/``ASK`` redirections after a resharding or a
failover. Every module above takes the client this returns and uses only what both clients
answer alike: single-key commands, scripts and ``MULTI``/``EXEC`` whose keys share one hash
slot (:mod:`service.profiles.keys` says how the keys are tagged), pipelines without a
transaction (the cluster client splits them by node) and :func:`mget` for values of many
models.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ClusterDownError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

#: A client :func:`connect` returns.
Client = aioredis.Redis | RedisCluster


def connect(url: str, cluster: bool = False) -> Client:
    """A Redis client for ``url``: one server, or (``cluster``) the cluster ``url``'s node is in.

    A dropped connection (Redis restarted, a failover) is retried on a fresh one, three
    times within about a second; every write of the roles is idempotent, so a retried
    command changes nothing. Longer outages are the roles' :mod:`service.runtime.outage`.

    Parameters
    ----------
    url : str
        ``redis://host:port/db`` (a cluster has only db 0).
    cluster : bool
        ``url`` is a node of a Redis Cluster.
    """
    options: dict[str, Any] = {
        "socket_timeout": 10, "socket_connect_timeout": 5,
        "retry": Retry(ExponentialBackoff(cap=1.0, base=0.05), 3),
    }
    if cluster:
        # A failover: MOVED/ClusterDown/TryAgain while the replica takes over are retried
        # here (three times, refreshing the slot map), then left to the outage policy.
        return RedisCluster.from_url(
            url, **options,
            retry_on_error=[RedisConnectionError, RedisTimeoutError, ClusterDownError, TryAgainError],
        )
    return aioredis.Redis.from_url(url, **options, retry_on_error=[RedisConnectionError, RedisTimeoutError])


def is_cluster(r: Client) -> bool:
    """Whether ``r`` is a Redis Cluster client."""
    return isinstance(r, RedisCluster)


async def mget(r: Client, keys: Sequence[str]) -> list[bytes | None]:
    """The values of ``keys`` (None for a missing one), in order, whatever slots they are in:
    one ``MGET`` on a standalone server, one per slot on a cluster (not atomic, like the
    separate reads it replaces)."""
    if not keys:
        return []
    if is_cluster(r):
        return await r.mget_nonatomic(list(keys))
    return await r.mget(list(keys))


async def flush(r: Client) -> None:
    """Delete every key (every master of a cluster): for tests and benchmarks."""
    if is_cluster(r):
        await r.flushdb(target_nodes=RedisCluster.PRIMARIES)
    else:
        await r.flushdb()


#: Hash slots whose script calls are in flight at once on a cluster (each node's pool holds
#: 100 connections).
SCRIPT_CONCURRENCY = 32

#: One script call: its keys (one hash slot) and its arguments.
ScriptCall = tuple[Sequence[Any], Sequence[Any]]


async def run_scripts(r: Client, script: Any, calls: Sequence[ScriptCall]) -> list[Any]:
    """Run ``script`` once per ``(keys, args)`` of ``calls``, in order; the answers, in order.

    Standalone: one pipeline (one round trip). A cluster client refuses scripts in a
    pipeline, so there the calls of one hash slot run one after the other, in their order
    (a later call may depend on an earlier one's writes: a label and its relabel), and the
    slots :data:`SCRIPT_CONCURRENCY` at a time. Each call's keys must share one slot. Not
    atomic as a whole on either: each call is.
    """
    if not calls:
        return []
    if is_cluster(r):
        by_slot: dict[int, list[int]] = {}
        for i, (keys, _args) in enumerate(calls):
            by_slot.setdefault(r.keyslot(keys[0]), []).append(i)
        out: list[Any] = [None] * len(calls)
        room = asyncio.Semaphore(SCRIPT_CONCURRENCY)

        async def run_slot(indices: list[int]) -> None:
            async with room:
                for i in indices:
                    keys, args = calls[i]
                    out[i] = await script(keys=list(keys), args=list(args))

        await asyncio.gather(*(run_slot(ix) for ix in by_slot.values()))
        return out
    async with r.pipeline(transaction=False) as p:
        for k, a in calls:
            await script(keys=list(k), args=list(a), client=p)
        return await p.execute()
