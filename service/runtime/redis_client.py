"""The one way a role opens Redis: a standalone server or a Redis Cluster, by a setting.

``redis_cluster`` (``FLEETWATCH_REDIS_CLUSTER``) false: ``redis_url`` names one Redis
server (``redis.asyncio.Redis``), or, as ``redis+sentinel://host:port[,host:port...]/name[/db]``,
the Redis Sentinels that monitor the primary called ``name`` (:func:`sentinel_target`): the
client asks them for the current primary and asks again after a failover. True: it names
any one node of a Redis Cluster, and the
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
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff
from redis.exceptions import ClusterDownError, ReadOnlyError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

#: A client :func:`connect` returns.
Client = aioredis.Redis | RedisCluster


SENTINEL_SCHEME = "redis+sentinel://"


class Connection(aioredis.Connection):
    """redis-py's asyncio connection, with a write on a connection the peer has closed
    raised as the connection error it is. redis-py 8.1.0 lets the torn-down transport's
    ``AttributeError`` / ``TypeError`` through (redis/redis-py#4287; fixed upstream in #4288,
    not yet released), past every retry: a Redis Cluster failover killed the detector with
    it. An ``OSError`` here is what redis-py's own error path turns into ``ConnectionError``
    (the connection dropped, the command retried on a fresh one)."""

    async def _send_packed_command(self, command: Any) -> None:
        writer = self._writer
        if writer is None:
            raise ConnectionResetError("the connection was closed")
        try:
            writer.writelines(command)
        except (AttributeError, TypeError) as exc:  # the transport torn down under the write
            raise ConnectionResetError("the connection was closed by the server") from exc
        await writer.drain()


@dataclass(frozen=True)
class SentinelTarget:
    """A primary monitored by Redis Sentinels (from a ``redis+sentinel://`` URL)."""

    sentinels: tuple[tuple[str, int], ...]
    name: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def sentinel_target(url: str) -> SentinelTarget | None:
    """The Sentinels and primary a ``redis+sentinel://`` URL names; None for another URL.

    ``redis+sentinel://[user:password@]host:port[,host:port...]/name[/db]``: the Sentinels'
    addresses (port 26379 when left out), the name they monitor the primary under, its
    database; the user and password are the primary's (the Sentinels are asked without).

    Raises
    ------
    ValueError
        A sentinel URL without a host or a primary name, or with a port or db that is not
        a number.

    Examples
    --------
    >>> sentinel_target("redis+sentinel://:pw@s1:26380,s2/fw/2")
    SentinelTarget(sentinels=(('s1', 26380), ('s2', 26379)), name='fw', db=2, username=None, password='pw')
    >>> sentinel_target("redis://localhost:6379/0") is None
    True
    """
    if not url.startswith(SENTINEL_SCHEME):
        return None
    rest = url[len(SENTINEL_SCHEME):]
    hosts, _, path = rest.partition("/")
    auth, _, hosts = hosts.rpartition("@")
    username, _, password = auth.partition(":")
    parts = [p for p in path.split("/") if p]
    sentinels = []
    for h in filter(None, hosts.split(",")):
        host, _, port = h.rpartition(":") if ":" in h else (h, "", "26379")
        if not host or not port.isdigit():
            raise ValueError(f"sentinel address {h!r} is not host[:port]")
        sentinels.append((host, int(port)))
    if not sentinels or not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ValueError("a sentinel URL is redis+sentinel://host:port[,host:port...]/name[/db]")
    return SentinelTarget(tuple(sentinels), unquote(parts[0]), int(parts[1]) if len(parts) == 2 else 0,
                          unquote(username) or None, unquote(password) or None)


def connect(url: str, cluster: bool = False) -> Client:
    """A Redis client for ``url``: one server, or (``cluster``) the cluster ``url``'s node is in.

    A dropped connection (Redis restarted, a failover) is retried on a fresh one, three
    times within about a second; every write of the roles is idempotent, so a retried
    command changes nothing. Longer outages are the roles' :mod:`service.runtime.outage`.

    Parameters
    ----------
    url : str
        ``redis://host:port/db`` (a cluster has only db 0), or a ``redis+sentinel://`` URL
        (:func:`sentinel_target`).
    cluster : bool
        ``url`` is a node of a Redis Cluster.

    Raises
    ------
    ValueError
        A Sentinel URL with ``cluster`` (a cluster fails over by itself), or a malformed one.
    """
    options: dict[str, Any] = {
        "socket_timeout": 10, "socket_connect_timeout": 5,
        "retry": Retry(ExponentialBackoff(cap=1.0, base=0.05), 3),
    }
    # A plain TCP connection (TLS, Unix sockets and Sentinel's connections keep redis-py's own).
    plain = {**options, "connection_class": Connection} if url.startswith("redis://") else options
    if cluster and url.startswith(SENTINEL_SCHEME):
        raise ValueError("redis_cluster with a redis+sentinel:// URL: a Redis Cluster fails over by "
                         "itself, name one of its nodes")
    if cluster:
        # A failover: MOVED/ClusterDown/TryAgain while the replica takes over are retried
        # here (three times, refreshing the slot map), then left to the outage policy.
        client = RedisCluster.from_url(
            url, **options,
            retry_on_error=[RedisConnectionError, RedisTimeoutError, ClusterDownError, TryAgainError],
        )
        # RedisCluster takes no connection class: set it where its nodes are made from
        # (the nodes it discovers) and on the startup nodes already made.
        client.nodes_manager.connection_kwargs["connection_class"] = Connection
        for node in client.nodes_manager.startup_nodes.values():
            node.connection_class = Connection
        return client
    target = sentinel_target(url)
    if target is not None:
        # The pool asks the Sentinels for the primary whenever it opens a connection: after a
        # failover the retried command reaches the promoted replica.
        return Sentinel(list(target.sentinels), socket_timeout=5).master_for(
            target.name, db=target.db, username=target.username, password=target.password,
            **options, retry_on_error=[RedisConnectionError, RedisTimeoutError, ReadOnlyError])
    return aioredis.Redis.from_url(url, **plain, retry_on_error=[RedisConnectionError, RedisTimeoutError])


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
