"""The Redis client every role uses (service/runtime/redis_client.py), on a real Redis: a
write on a connection whose transport was torn down (the peer closed it) is a connection
error the client retries on a fresh connection, not the transport's TypeError /
AttributeError, which redis-py 8.1.0 lets through (redis/redis-py#4287)."""

from __future__ import annotations

import pytest

from service.runtime.redis_client import Connection, connect


@pytest.mark.parametrize("leak", [TypeError("'NoneType' object is not callable"),
                                  AttributeError("'NoneType' object has no attribute '_add_writer'")])
async def test_a_write_on_a_torn_down_connection_is_retried_on_a_fresh_one(settings, leak):
    if settings.redis_cluster:
        pytest.skip("standalone client (the cluster's nodes take the same connection class)")
    r = connect(settings.redis_url)
    try:
        assert await r.set("fw:test:torn", b"1")
        pool = r.connection_pool
        conn = await pool.get_connection()
        assert isinstance(conn, Connection)

        def torn(_command):  # what CPython's transport raises once connection_lost ran
            raise leak

        conn._writer.writelines = torn
        await pool.release(conn)
        assert await r.get("fw:test:torn") == b"1"  # the client's retry, on a new connection
    finally:
        await r.delete("fw:test:torn")
        await r.aclose()
