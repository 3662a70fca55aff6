"""The pipeline on a real local Redis Cluster (three masters, three replicas): the
crash-safety, rebalance, Redis-outage and end-to-end scenarios of the suite, run here
against the cluster (the scenarios' own code, imported: the ``redis_url`` and
``redis_is_cluster`` fixtures below make every fixture they use cluster-backed).

The whole suite runs on a cluster with ``FLEETWATCH_TEST_REDIS=cluster``."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.embedded import LocalRedisCluster, redis_cluster
from tests.test_checkpoint_steps import (  # noqa: F401 (collected here, on the cluster)
    test_a_checkpoint_a_failover_rolled_back_is_refused_then_rewritten_whole,
    test_a_checkpoint_interrupted_after_any_step_is_completed_by_the_next_owner,
    test_a_fenced_out_owner_neither_checkpoints_nor_publishes,
    test_a_window_a_failover_lost_is_published_again_by_the_next_checkpoint,
)
from tests.test_crash_safety import (  # noqa: F401
    proc_settings,
    test_sigkill_at_random_moments_loses_and_double_counts_nothing,
    test_three_replicas_with_a_rebalance_mid_window_equal_one,
)
from tests.test_end_to_end import test_injected_shift_raises_an_alert_on_the_api  # noqa: F401
from tests.test_outages import outage_loses_nothing

pytestmark = pytest.mark.integration


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
    from tests.test_crash_safety import MODELS

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
