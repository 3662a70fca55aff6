"""A broker that lost its log: the embedded broker (memory storage) is restarted on the
same port, so the aggregator's checkpointed offsets (in Redis, which kept its state) lie
beyond the new log's end. The aggregator notices, counts it, reads the new log from its
earliest offset, and aggregates every new record exactly once."""

from __future__ import annotations

import pytest

from service.embedded import kafka_broker
from service.profiles.continuity import REPLACED, SHORTER, LogContinuity, LogMark
from tests.conftest import wait_for
from tests.metric_samples import sample
from tests.roles import running
from tests.test_profiles_broker_restart import aggregated
from tests.test_profiles_crash_safety import WINDOW, produce, workload


def discontinuities() -> float:
    """Logs found gone backwards, for either reason (which check fires first is a race
    between the broker's high watermark and the producers' first messages)."""
    return sum(sample("fleetwatch_log_discontinuities_total", reason=r) for r in (SHORTER, REPLACED))


@pytest.fixture
def memory_broker(tmp_path):
    broker = kafka_broker(tmp_path / "broker")
    broker.start()
    yield broker
    broker.stop()


@pytest.mark.parametrize("order", ["aggregator_first", "producers_first", "aggregator_running"])
async def test_broker_that_lost_its_log_is_read_again_from_the_start(
        order, memory_broker, settings, store):
    s = settings.model_copy(update={
        "kafka_bootstrap": f"127.0.0.1:{memory_broker.port}",
        "idle_close_seconds": 3600.0, "allowed_lateness_seconds": 60,
        "log_rewind_confirm_seconds": 0.5,
    })
    before = workload(2_000, windows=2, seed=1)
    after = workload(1_000, windows=2, seed=2)
    for r in after:  # new records, from the window ``before`` left open on
        r.event_time += WINDOW
    seen = discontinuities()

    async with running(s, store, "aggregator"):
        await produce(s, before)  # one message per model
        await wait_for(lambda: _equals(store, s, len(before)), timeout=60)
        if order == "aggregator_running":
            memory_broker.stop()  # the log is lost under a running aggregator
            memory_broker.start()
            await produce(s, after, batch=5)
            await wait_for(lambda: _equals(store, s, len(before) + len(after)), timeout=90)
    if order == "aggregator_first":
        memory_broker.stop()
        memory_broker.start()
        async with running(s, store, "aggregator"):
            await produce(s, after, batch=5)
            await wait_for(lambda: _equals(store, s, len(before) + len(after)), timeout=90)
    elif order == "producers_first":
        memory_broker.stop()
        memory_broker.start()
        # Many small messages: the new log grows past the old checkpoint's offsets, so the
        # aggregator's seek lands inside it (on another message) rather than past its end.
        await produce(s, after, batch=5)
        async with running(s, store, "aggregator"):
            await wait_for(lambda: _equals(store, s, len(before) + len(after)), timeout=90)

    assert await aggregated(store, s) == len(before) + len(after)  # nothing counted twice
    assert discontinuities() > seen


async def _equals(store, settings, n: int) -> bool:
    got = await aggregated(store, settings)
    assert got <= n, f"{got} records aggregated, only {n} sent: counted twice"
    return got == n


def test_mark_identifies_the_message_and_round_trips():
    from types import SimpleNamespace as M

    a = M(offset=9, timestamp=1_700_000_000_000, value=b"payload")
    mark = LogMark.of(a)
    assert LogMark.from_json(mark.to_json()) == mark
    c = LogContinuity(10, mark, 1.0)
    assert c.verifying and c.seek_offset(10) == 9
    assert c.first_message(a, 10) == "covered"
    c = LogContinuity(10, mark, 1.0)
    assert c.first_message(M(offset=9, timestamp=a.timestamp, value=b"other"), 10) == "replaced"
    c = LogContinuity(10, mark, 1.0)
    assert c.first_message(M(offset=12, timestamp=1, value=b"x"), 10) == "gap"
    with pytest.raises(ValueError, match="not a log mark"):
        LogMark.from_json(b"[1, 2]")
    # A mark that is not the checkpoint's last message (older format, other offset) is ignored.
    assert not LogContinuity(11, mark, 1.0).verifying
