"""service/runtime/redis_client.py on one Redis, and on a Redis Cluster in
tests/test_redis_cluster.py: scripts over many models run in order per model, reads of
many models' keys answer in order."""

from __future__ import annotations

from service.profiles.store import Store
from service.runtime.redis_client import mget, run_scripts

MODELS = [f"model-{i}" for i in range(8)]


async def test_script_calls_of_one_key_run_in_their_order_and_answer_in_order(store: Store):
    push = store.r.register_script("return redis.call('RPUSH', KEYS[1], ARGV[1])")
    calls = [([f"fw:{{{m}}}:log"], [f"{m}:{i}"]) for i in range(40) for m in MODELS]
    answers = await run_scripts(store.r, push, calls)
    assert answers == [i + 1 for i in range(40) for _m in MODELS]  # each list's length after the push
    for m in MODELS:
        assert await store.r.lrange(f"fw:{{{m}}}:log", 0, -1) == [f"{m}:{i}".encode() for i in range(40)]


async def test_mget_reads_keys_of_many_slots_in_order(store: Store):
    for m in MODELS[::2]:
        await store.r.set(f"fw:{{{m}}}:x", m)
    assert await mget(store.r, [f"fw:{{{m}}}:x" for m in MODELS]) == [
        m.encode() if i % 2 == 0 else None for i, m in enumerate(MODELS)]
    assert await mget(store.r, []) == []
