"""The checkpoint protocol of service/profiles/checkpoints.py, interrupted after each of its
steps: the partition's next owner completes it, so every closed window is stored and
announced, none is lost, none is made pending twice, and the partition's offset moves
exactly with the windows it covers. Runs on one Redis here and on a Redis Cluster in
tests/test_redis_cluster.py (the windows' models are in different hash slots there)."""

from __future__ import annotations

import pytest

from sdk.record import PredictionRecord
from service.profiles.checkpoints import ClosedWindow
from service.profiles.keys import PUBLISH_FIELD, WINDOWS_STREAM, partition_key, pending_key, window_member
from service.profiles.store import Store
from sketches.profile import WindowProfile

TOPIC = "pred"
MODELS = [f"model-{i}" for i in range(8)]  # spread over every master of a 3-master cluster
START = 1_700_000_100 - 1_700_000_100 % 300


class Crash(Exception):
    """The process died here."""


def closed_windows() -> list[ClosedWindow]:
    """One closed window per model, model i's of i + 1 records."""
    return [ClosedWindow(m, window_member(300, START, "1"), START, profile(m, i + 1))
            for i, m in enumerate(MODELS)]


def profile(model_id: str, n: int) -> bytes:
    p = WindowProfile(model_id, START, 300)
    p.add_records([PredictionRecord(model_id, "1", f"p{j}", START + j, {"x": float(j)}) for j in range(n)])
    return p.to_bytes()


def die_at(store: Store, step: str) -> None:
    """Make the store's ``step`` script raise :class:`Crash` instead of running."""

    async def crash(*_a, **_k):
        raise Crash(step)

    setattr(store, step, crash)


async def events(store: Store) -> list[tuple[str, str]]:
    return [(f[b"model"].decode(), f[b"member"].decode()) for _id, f in await store.r.xrange(WINDOWS_STREAM)]


@pytest.mark.parametrize("step", ["_publish", "_announce", "_settle", None])
async def test_a_checkpoint_interrupted_after_any_step_is_completed_by_the_next_owner(settings, store, step):
    closed = closed_windows()
    first = await store.acquire_partition(TOPIC, 0)
    dying = Store(settings.redis_url, settings.redis_cluster)
    try:
        if step is not None:
            die_at(dying, step)
        try:
            ok = await dying.checkpoint(TOPIC, 0, first.epoch, {"offset": 1234}, [], closed, 3600)
            assert ok and step is None
        except Crash:
            assert step is not None
    finally:
        await dying.close()
    # Step 1 held: the offset moved with the windows, which wait in pub: fields unless done.
    fields = await store.r.hkeys(partition_key(TOPIC, 0))
    assert int(await store.r.hget(partition_key(TOPIC, 0), "offset")) == 1234
    assert any(f.startswith(PUBLISH_FIELD.encode()) for f in fields) == (step is not None)

    # The policy applies one window meanwhile (an event announced before the crash).
    applied = closed[0]
    if step in ("_settle", None):
        await store.r.zrem(pending_key(applied.model_id), applied.member)

    nxt = await store.acquire_partition(TOPIC, 0)
    assert nxt.epoch == first.epoch + 1
    republished = await store.publish_pending(TOPIC, 0, nxt, 3600)
    assert len(republished) == (0 if step is None else len(closed))
    assert not any(f.startswith(PUBLISH_FIELD.encode())
                   for f in await store.r.hkeys(partition_key(TOPIC, 0)))
    for i, w in enumerate(closed):
        members = await store.window_members(w.model_id, 0, float("inf"))
        assert members == [w.member]
        (profile,) = await store.window_profiles(w.model_id, members)
        assert profile.count == i + 1
        pending = await store.r.zrange(pending_key(w.model_id), 0, -1)
        assert pending == ([] if w is applied and step in ("_settle", None) else [w.member.encode()])
        assert await store.model_exists(w.model_id)
    announced = await events(store)
    want = {(w.model_id, w.member) for w in closed}
    assert set(announced) == want
    # Each announced once, but twice when the crash came after the announcement (step 3).
    assert len(announced) == len(want) * (2 if step == "_settle" else 1)


async def test_a_fenced_out_owner_neither_checkpoints_nor_publishes(store):
    old = await store.acquire_partition(TOPIC, 1)
    await store.acquire_partition(TOPIC, 1)  # a new owner
    assert not await store.checkpoint(TOPIC, 1, old.epoch, {"offset": 99}, [], closed_windows(), 3600)
    assert await store.r.hget(partition_key(TOPIC, 1), "offset") is None
    assert await events(store) == []
    assert await store.window_members(MODELS[0], 0, float("inf")) == []
