"""The pipeline on a real local Redis Cluster (three masters, three replicas): the
crash-safety, rebalance, Redis-outage, end-to-end and scale-out scenarios of the suite,
and a master's failover, run here against the cluster (the scenarios' own code,
imported: the ``redis_url`` and ``redis_is_cluster`` fixtures below make every fixture
they use cluster-backed).

The whole suite runs on a cluster with ``FLEETWATCH_TEST_REDIS=cluster``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from service.embedded import LocalRedisCluster, redis_cluster, redis_server
from service.kafka import ensure_topics
from service.profiles.keys import MODELS as MODELS_KEY
from service.profiles.keys import config_key, counted_key, pending_key
from service.profiles.store import Store
from tests.conftest import wait_for
from tests.roles import running
from tests.test_checkpoint_steps import (  # noqa: F401 (collected here, on the cluster)
    test_a_checkpoint_a_failover_rolled_back_is_refused_then_rewritten_whole,
    test_a_checkpoint_interrupted_after_any_step_is_completed_by_the_next_owner,
    test_a_fenced_out_owner_neither_checkpoints_nor_publishes,
    test_a_window_a_failover_lost_is_published_again_by_the_next_checkpoint,
)
from tests.test_end_to_end import test_injected_shift_raises_an_alert_on_the_api  # noqa: F401
from tests.test_profiles_crash_safety import MODELS as CRASH_MODELS
from tests.test_profiles_crash_safety import (  # noqa: F401
    all_windows_stored,
    assert_matches,
    committed_offsets,
    proc_settings,
    produce,
    test_sigkill_at_random_moments_loses_and_double_counts_nothing,
    test_three_replicas_with_a_rebalance_mid_window_equal_one,
    workload,
)
from tests.test_profiles_outages import outage_loses_nothing
from tests.test_redis_client import (  # noqa: F401
    test_mget_reads_keys_of_many_slots_in_order,
    test_script_calls_of_one_key_run_in_their_order_and_answer_in_order,
)
from tests.test_runtime_scale_out import (
    assert_same_answers,
    references,
    run_pipeline,
    scale_settings,
    shifted_workload,
)

# A scenario here starts, fails over or stops a cluster of six nodes while the roles run:
# minutes on a busy machine (the suite starts long modules first).
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = redis_cluster(Path(tmp_path_factory.mktemp("redis-cluster")))
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def redis_url(cluster: LocalRedisCluster) -> str:
    return cluster.url


@pytest.fixture(scope="module")
def redis_is_cluster() -> bool:
    return True


async def test_models_spread_over_every_master(store, cluster: LocalRedisCluster):
    """The test models' keys are on every master, so the scenarios cross slots and nodes."""
    from service.profiles.keys import config_key
    from tests.test_checkpoint_steps import MODELS as STEP_MODELS
    from tests.test_profiles_crash_safety import MODELS

    nodes = {store.r.get_node_from_key(config_key(m)).port for m in STEP_MODELS}
    assert nodes == set(cluster.master_ports())
    assert len({store.r.get_node_from_key(config_key(m)).port for m in MODELS}) >= 2


async def test_a_cluster_outage_pauses_consumption_and_loses_nothing(settings, tmp_path):
    """Every node of a cluster of its own stopped for the outage, then started again (each
    from its append-only file and cluster configuration)."""
    own = redis_cluster(tmp_path / "cluster")
    own.start()

    def up() -> None:
        for n in own.nodes:
            n.start()

    settings = settings.model_copy(update={"redis_url": own.url})
    await outage_loses_nothing(settings, own.stop, up)


async def test_a_master_sigkilled_mid_ingest_fails_over_and_every_window_counts_exactly(settings, tmp_path):
    """A master holding models' windows and partition checkpoints is SIGKILLed while
    records flow; its replica is promoted (cluster-node-timeout 1 s) and the aggregator and
    detector resume by themselves. Every window's count is then exact, and every window is
    counted by the detector (evaluated, or skipped when it has no baseline yet) and applied
    by the alert policy; a write the replica had not received is
    found and written again (fleetwatch_windows_republished_total,
    fleetwatch_checkpoints_rolled_back_total), never left wrong."""
    own = redis_cluster(tmp_path / "cluster", node_timeout_ms=1_000)
    own.start()
    settings = settings.model_copy(update={
        "redis_url": own.url, "allowed_lateness_seconds": 60, "idle_close_seconds": 5.0,
        "max_poll_records": 1000,
    })
    store = Store(settings.redis_url, settings.redis_cluster)
    records = workload(40_000, windows=3, seed=9)
    await store.ping()  # the client reads the slot map
    fleet_master = store.r.get_node_from_key(MODELS_KEY).port
    victim = next(p for m in CRASH_MODELS
                  if (p := store.r.get_node_from_key(config_key(m)).port) != fleet_master)
    try:
        await ensure_topics(settings)
        async with running(settings, store, "aggregator", "detector"):
            await produce(settings, records[:15_000])

            async def checkpointed() -> bool:
                return await committed_offsets(store, settings) > 0

            await wait_for(checkpointed, timeout=60)
            rest = [records[i:i + 1000] for i in range(15_000, len(records), 1000)]
            producer = asyncio.create_task(produce_slowly(settings, rest))
            own.node(victim).kill()
            await asyncio.to_thread(own.wait_ok, 60, False)  # its replica serves its slots
            assert victim not in own.master_ports() and len(own.master_ports()) == 3
            await producer
            await wait_for(lambda: all_windows_stored(store, records), timeout=180)

            async def applied() -> bool:  # every window counted by the detector, none pending
                for m in CRASH_MODELS:
                    members = await store.window_members(m, 0, float("inf"))
                    counted = {k.decode() for k in await store.r.zrange(counted_key(m), 0, -1)}
                    if counted != set(members) or await store.r.zcard(pending_key(m)):
                        return False
                return True

            await wait_for(applied, timeout=120)
        await assert_matches(store, records)
    finally:
        await store.close()
        own.stop()


async def produce_slowly(settings, slices) -> None:
    for s in slices:
        await produce(settings, s)
        await asyncio.sleep(0.5)


async def test_three_aggregators_and_three_detectors_on_the_cluster_equal_one_of_each_on_one_redis(
        settings, tmp_path):
    """tests/test_runtime_scale_out.py's comparison, the 3 + 3 run on the cluster, the 1 + 1 run on one
    Redis: the same window profiles and the same alerts (ids, windows, states, evidence,
    incidents)."""
    server = redis_server(tmp_path / "redis")
    server.start()
    try:
        base = scale_settings(settings)
        records, refs = shifted_workload(), references()
        alone = base.model_copy(update={"redis_url": f"redis://127.0.0.1:{server.port}/0",
                                        "redis_cluster": False})
        one = await run_pipeline(alone, "one", 1, 1, 1, records, refs, tmp_path)
        many = await run_pipeline(base, "many", 0, 3, 3, records, refs, tmp_path)
        assert_same_answers(one, many, records)
    finally:
        server.stop()
