"""A standalone Redis with Sentinel: the roles' client follows a failover by itself."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from service.embedded import LocalRedisSentinel
from service.profiles.store import Store
from service.registry import ModelConfig
from service.runtime.redis_client import connect
from tests.conftest import wait_for

pytestmark = pytest.mark.integration


async def test_a_store_on_a_sentinel_url_follows_the_primary_through_a_failover(tmp_path):
    local = LocalRedisSentinel(tmp_path)
    local.start()
    store = Store(local.url)
    try:
        await store.put_model_config("m", ModelConfig(window_seconds=300))
        # the write reached the replica before the primary dies (else a failover may lose it)
        assert await store.r.wait(1, 5_000) == 1
        local.primary.kill()

        async def promoted() -> bool:
            try:
                return (await store.model_configs(["m"]))["m"] is not None and (
                    await store.r.set("fw:probe", "1")) is True
            except aioredis.RedisError:
                return False

        await wait_for(promoted, timeout=60)  # no restart, no new client: the same store
        assert (await store.r.info("replication"))["role"] == "master"
        assert (await store.model_configs(["m"]))["m"].window_seconds == 300  # nothing lost
        sentinel = connect(f"redis://127.0.0.1:{local.sentinel.port}/0")
        master = await sentinel.execute_command("SENTINEL", "get-master-addr-by-name", "fw")
        assert int(master[1]) == local.replica.port
        await sentinel.aclose()
    finally:
        await store.close()
        local.stop()


def test_a_sentinel_url_is_not_a_cluster_node():
    with pytest.raises(ValueError, match="fails over by itself"):
        connect("redis+sentinel://127.0.0.1:26379/fw", cluster=True)
    with pytest.raises(ValueError, match="host:port"):
        connect("redis+sentinel://127.0.0.1:26379")
