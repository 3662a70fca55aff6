"""A Redis written before the fleet-wide keys were hash-tagged ``{fw}`` (``fw:models``,
``fw:alert:<id>``, ``fw:{m}:alerts``, ...) reads back whole after the upgrade the roles
and the API run at start: every key renamed, none lost, none changed, streams with their
consumer groups."""

from __future__ import annotations

import pytest

from service.alerting.store import AlertStore
from service.profiles.keys import GLOBAL
from service.profiles.store import Store
from tests.test_alerting_policy import BREACH, apply, policy
from tests.test_ui_fleet import config


def old_name(key: str) -> str:
    """The inverse of today's layout: the key's name before the ``{fw}`` tag."""
    if key.startswith(GLOBAL + "alerts:"):
        return "fw:{" + key[len(GLOBAL + "alerts:"):] + "}:alerts"
    return "fw:" + key[len(GLOBAL):] if key.startswith(GLOBAL) else key


async def everything(store: Store) -> dict[bytes, bytes]:
    return {k: await store.r.dump(k) async for k in store.r.scan_iter(count=1_000)}


async def test_a_redis_of_the_old_layout_reads_back_after_the_upgrade(store: Store, redis_is_cluster: bool):
    if redis_is_cluster:
        pytest.skip("a cluster never held the old layout (its scripts were refused)")
    await store.put_model_config("fraud", config(1))
    p = policy(store)
    for w in range(2):
        await apply(p, "fraud", w, {("x", "psi"): BREACH}, config(1))
    await store.ensure_event_group("detectors")
    await store.acquire_partition("fw.predictions", 0)
    now = await everything(store)
    assert any(k.startswith(GLOBAL.encode() + b"alerts:") for k in now)  # a model's alert index
    alerts = await AlertStore(store.r).alerts(None, 0, 10)
    assert alerts

    renamed = 0
    for k in list(now):
        if (old := old_name(k.decode())) != k.decode():
            await store.r.rename(k, old)
            renamed += 1
    assert await store.models() == []  # the new code reads nothing of the old layout

    assert await store.upgrade_key_layout() == renamed
    assert await everything(store) == now
    assert await store.models() == ["fraud"]
    assert await AlertStore(store.r).alerts(None, 0, 10) == alerts
    assert await AlertStore(store.r).alerts("fraud", 0, 10) == alerts
    groups = await store.r.xinfo_groups(GLOBAL + "windows")
    assert [g["name"] for g in groups] == [b"detectors"]
    assert await store.upgrade_key_layout() == 0  # once
