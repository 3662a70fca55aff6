"""The checkpoint protocol of service/profiles/checkpoints.py, interrupted after each of its
steps: the partition's next owner completes it, so every closed window is stored and
announced, none is lost, none is made pending twice, and the partition's offset moves
exactly with the windows it covers. Runs on one Redis here and on a Redis Cluster in
tests/test_redis_cluster.py (the windows' models are in different hash slots there)."""

from __future__ import annotations

import json

import pytest

from sdk.record import PredictionRecord
from service.profiles.checkpoints import ClosedWindow, RolledBack, publish_field
from service.profiles.keys import (
    PUBLISH_FIELD,
    WINDOWS_STREAM,
    partition_key,
    pending_key,
    profile_key,
    traffic_key,
    window_index_key,
    window_member,
)
from service.profiles.store import Store
from sketches.profile import WindowProfile
from tests.metric_samples import sample

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


def pub_fields(fields) -> list[bytes]:
    return [f for f in fields if f.startswith(PUBLISH_FIELD.encode())]


@pytest.mark.parametrize("step", ["_publish", "_announce", None])
async def test_a_checkpoint_interrupted_after_any_step_is_completed_by_the_next_owner(settings, store, step):
    closed = closed_windows()
    first = await store.acquire_partition(TOPIC, 0)
    dying = Store(settings.redis_url, settings.redis_cluster)
    try:
        if step is not None:
            die_at(dying, step)
        try:
            assert await dying.checkpoint(TOPIC, 0, first.epoch, {"offset": 1234}, [], closed, 3600) == closed
            assert step is None
        except Crash:
            assert step is not None
    finally:
        await dying.close()
    # Step 1 held: the offset moved with the windows, which wait in pub: fields (until the
    # next checkpoint has verified them, even when every step ran).
    assert int(await store.r.hget(partition_key(TOPIC, 0), "offset")) == 1234
    assert len(pub_fields(await store.r.hkeys(partition_key(TOPIC, 0)))) == len(closed)

    # The policy applied one window meanwhile (its event was announced before the crash).
    applied = closed[0]
    if step is None:
        await store.r.zrem(pending_key(applied.model_id), applied.member)

    nxt = await store.acquire_partition(TOPIC, 0)
    assert nxt.epoch == first.epoch + 1
    republished = await store.publish_pending(TOPIC, 0, nxt, 3600)
    assert sorted(republished, key=lambda w: w.model_id) == closed
    assert await store.checkpoint(TOPIC, 0, nxt.epoch, {"offset": 1300}, [], [], 3600, republished) == []
    assert pub_fields(await store.r.hkeys(partition_key(TOPIC, 0))) == []
    for i, w in enumerate(closed):
        members = await store.window_members(w.model_id, 0, float("inf"))
        assert members == [w.member]
        (profile,) = await store.window_profiles(w.model_id, members)
        assert profile.count == i + 1
        pending = await store.r.zrange(pending_key(w.model_id), 0, -1)
        assert pending == ([] if w is applied and step is None else [w.member.encode()])
        assert await store.model_exists(w.model_id)
    announced = await events(store)
    want = [(w.model_id, w.member) for w in closed]
    # Each announced once; after a complete checkpoint, again by the next owner while still
    # pending (the detector evaluates a window once whatever its events), but not the
    # window the policy applied.
    again = want[1:] if step is None else []
    assert sorted(announced) == sorted(want + again)
    # the fleet's traffic holds each window's records once, however often it was announced
    traffic = await store.r.hgetall(traffic_key(300, START))
    assert {tuple(json.loads(k)): int(v) for k, v in traffic.items()} == {
        (w.model_id, "1"): i + 1 for i, w in enumerate(closed)}
    assert await store.fleet_unsettled(300, START) == 0
    assert await store.fleet_unsettled(300, START + 300) == len(closed)  # none closed the next


async def test_a_window_a_failover_lost_is_published_again_by_the_next_checkpoint(store):
    """A master that died before its replica had the window's keys: the promoted replica
    lacks them; the next checkpoint finds the window missing from its model's index and
    stores it again from its pub: field, pending for the policy and announced."""
    closed = closed_windows()
    cp = await store.acquire_partition(TOPIC, 2)
    published = await store.checkpoint(TOPIC, 2, cp.epoch, {"offset": 10}, [], closed, 3600)
    lost = closed[3]
    await store.r.delete(profile_key(lost.model_id, lost.member), window_index_key(lost.model_id),
                         pending_key(lost.model_id))
    before = sample("fleetwatch_windows_republished_total") or 0
    assert await store.checkpoint(TOPIC, 2, cp.epoch, {"offset": 20}, [], [], 3600, published) == [lost]
    assert sample("fleetwatch_windows_republished_total") - before == 1
    (profile,) = await store.window_profiles(lost.model_id, [lost.member])
    assert profile.count == 4
    assert await store.r.zrange(pending_key(lost.model_id), 0, -1) == [lost.member.encode()]
    assert (await events(store)).count((lost.model_id, lost.member)) == 2
    # Its pub: field stays until a checkpoint finds it stored; the others are forgotten.
    assert pub_fields(await store.r.hkeys(partition_key(TOPIC, 2))) == [publish_field(lost).encode()]
    assert await store.checkpoint(TOPIC, 2, cp.epoch, {"offset": 30}, [], [], 3600, [lost]) == []
    assert pub_fields(await store.r.hkeys(partition_key(TOPIC, 2))) == []


async def test_a_fenced_out_owner_neither_checkpoints_nor_publishes(store):
    old = await store.acquire_partition(TOPIC, 1)
    await store.acquire_partition(TOPIC, 1)  # a new owner
    assert await store.checkpoint(TOPIC, 1, old.epoch, {"offset": 99}, [], closed_windows(), 3600) is None
    assert await store.r.hget(partition_key(TOPIC, 1), "offset") is None
    assert await events(store) == []
    assert await store.window_members(MODELS[0], 0, float("inf")) == []


async def test_a_checkpoint_a_failover_rolled_back_is_refused_then_rewritten_whole(store):
    """The partition's key lost its last checkpoint (its master died before the replica had
    it): the next checkpoint, expecting sequence number 2, finds 1 and is refused with
    nothing written; the whole state then replaces what the key holds."""
    cp = await store.acquire_partition(TOPIC, 3)
    assert cp.seq == 0
    key = partition_key(TOPIC, 3)
    first = {"offset": 10, "open:a": b"1"}
    assert await store.checkpoint(TOPIC, 3, cp.epoch, first, [], [], 3600, None, 0) == []
    before = await store.r.hgetall(key)
    assert await store.checkpoint(TOPIC, 3, cp.epoch, {"offset": 20, "open:b": b"2"}, ["open:a"], [], 3600,
                                  None, 1) == []
    await store.r.delete(key)  # the promoted replica has the state as of the first checkpoint
    await store.r.hset(key, mapping=before)
    with pytest.raises(RolledBack):
        await store.checkpoint(TOPIC, 3, cp.epoch, {"offset": 30}, [], [], 3600, None, 2)
    assert await store.r.hgetall(key) == before
    assert await store.checkpoint(TOPIC, 3, cp.epoch, {"offset": 30, "open:b": b"3"}, [], [], 3600, None, 2,
                                  full=True) == []
    assert await store.r.hgetall(key) == {b"epoch": str(cp.epoch).encode(), b"seq": b"3", b"offset": b"30",
                                          b"open:b": b"3"}
    assert (await store.acquire_partition(TOPIC, 3)).seq == 3
