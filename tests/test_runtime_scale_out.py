"""Scale-out changes throughput, never answers: 3 aggregator and 3 detector
processes against one broker and one Redis store the same window profiles and
raise the same alerts (FDR decisions, persistence, evidence) as 1 + 1 on the
same workload.

Each run has its own topics, consumer groups and Redis database, the same
reference profiles, and a workload with shifts in some windows (so there are
alerts to compare): ``fraud`` feature ``x`` x10 from window 3, ``churn``
feature ``c`` replaced by a new category from window 4, ``ranker`` feature
``c`` 60 % null in window 2 only (a one-window data-quality break: it pages at
once, without the k-of-m wait); ``ads`` unchanged.
"""

from __future__ import annotations

import signal
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from sdk.record import PredictionRecord
from service.alerting.store import AlertStore
from service.embedded import free_port
from service.kafka import ensure_topics
from service.profiles.reference import build_reference
from service.profiles.store import Store
from service.runtime.redis_client import flush
from service.settings import Settings
from tests.conftest import wait_for
from tests.processes import role_process
from tests.test_profiles_crash_safety import (
    MODELS,
    T0,
    WINDOW,
    all_windows_stored,
    assert_matches,
    produce,
    workload,
)

WINDOWS = 6
#: model -> (first shifted window, feature): where an alert episode must begin
ALERTED = {"fraud": (3, "x"), "churn": (4, "c"), "ranker": (2, "c")}


def shifted_workload() -> list[PredictionRecord]:
    records = workload(24_000, windows=WINDOWS, seed=7)
    rng = np.random.default_rng(8)
    for r in records:
        w = int((r.event_time - T0) // WINDOW)
        if r.model_id == "fraud" and w >= 3:
            r.features["x"] *= 10.0
        elif r.model_id == "churn" and w >= 4:
            r.features["c"] = "e"
        elif r.model_id == "ranker" and w == 2 and rng.uniform() < 0.6:
            r.features["c"] = None
    return records


def references() -> dict:
    rows = {m: [] for m in MODELS}
    for r in workload(20_000, windows=1, seed=99):  # same distributions, no shift
        rows[r.model_id].append({**r.features, "score": r.score})
    return {m: build_reference(m, rs, score_column="score") for m, rs in rows.items()}


def with_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{db}"))


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) if f.name == name
               for s in f.samples if s.name.endswith("_total"))


async def all_evaluated(store: Store) -> bool:
    for m in MODELS:
        for member in await store.window_members(m, 0, float("inf")):
            if await store.results(m, member) is None:
                return False
    return True


async def snapshot(store: Store) -> tuple[dict, set]:
    """Per (model, window): count, x min/max/nulls, c frequencies/nulls; and the alerts."""
    profiles = {}
    for m in MODELS:
        members = await store.window_members(m, 0, float("inf"))
        for p in await store.window_profiles(m, members):
            x, c = p.features["x"], p.features["c"]
            profiles[(m, p.window_start)] = (
                p.count, x.numeric.min, x.numeric.max, x.null_count,
                c.categorical.frequencies(), c.null_count,
            )
    alerts = {(a.id, a.model_id, a.window_start, a.feature, a.check, a.state,
               a.fired_window_start, a.evidence_count, a.incident_id)
              for a in await AlertStore(store.r).alerts(None, 0, 100_000)}
    return profiles, alerts


async def run_pipeline(base: Settings, name: str, db: int, aggregators: int, detectors: int,
                       records: list[PredictionRecord], refs: dict, log_dir: Path):
    """Run the workload through `aggregators` + `detectors` processes; return the
    stored profiles and alerts, and records aggregated / windows evaluated per process.
    On a Redis Cluster (``base.redis_cluster``) ``db`` must be 0."""
    s = base.model_copy(update={
        "redis_url": with_db(base.redis_url, db),
        "predictions_topic": f"{base.predictions_topic}-{name}",
        "dead_letter_topic": f"{base.dead_letter_topic}-{name}",
        "aggregator_group": f"{base.aggregator_group}-{name}",
        "detector_group": f"{base.detector_group}-{name}",
    })
    store = Store(s.redis_url, s.redis_cluster)
    procs: list[tuple[str, int, object, Path]] = []
    try:
        await flush(store.r)
        for m, ref in refs.items():
            await store.put_reference(m, ref)
        await ensure_topics(s)
        for role, n in (("aggregate", aggregators), ("detect", detectors)):
            for i in range(n):
                port, log = free_port(), log_dir / f"{name}-{role}-{i}.log"
                procs.append((role, port, role_process(s.model_copy(update={"metrics_port": port}),
                                                       role, log), log))

        async def all_aggregators_assigned() -> bool:
            # Every replica has been assigned partitions (logged at INFO), so all have
            # joined the group before the first record arrives; the work counts
            # checked below show that it was spread.
            assert all(p.poll() is None for _r, _port, p, _log in procs), "a role process died"
            return all(log.exists() and "acquired" in log.read_text(errors="replace")
                       for role, _port, _p, log in procs if role == "aggregate")

        await wait_for(all_aggregators_assigned, timeout=60, interval=0.2)
        await produce(s, records)

        async def done() -> bool:
            return await all_windows_stored(store, records) and await all_evaluated(store)

        await wait_for(done, timeout=90, interval=0.2)
        await assert_matches(store, records)  # every window, against the raw records
        work = {(role, port): metric(port, "fleetwatch_records_aggregated" if role == "aggregate"
                                     else "fleetwatch_detector_windows")
                for role, port, _p, _log in procs}
        checkpointed = [metric(port, "fleetwatch_records_checkpointed")
                        for role, port, _p, _log in procs if role == "aggregate"]
        assert sum(checkpointed) == len(records), checkpointed  # every record, once
        result = await snapshot(store)
    finally:
        for _role, _port, p, _log in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = [p.wait(30) for _role, _port, p, _log in procs]
        await flush(store.r)
        await store.close()
    assert codes == [0] * len(procs), codes
    return result, work


async def test_three_aggregators_and_three_detectors_equal_one_of_each(settings, tmp_path):
    base = scale_settings(settings)
    records, refs = shifted_workload(), references()
    # One run after the other: both on the same broker and Redis server.
    one = await run_pipeline(base, "one", 1, 1, 1, records, refs, tmp_path)
    many = await run_pipeline(base, "many", 2, 3, 3, records, refs, tmp_path)
    assert_same_answers(one, many, records)


def scale_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={
        "allowed_lateness_seconds": 60, "idle_close_seconds": 2.0,
        "checkpoint_interval_seconds": 0.3, "kafka_session_timeout_ms": 3000,
        "kafka_heartbeat_interval_ms": 500, "topic_partitions": 4,
    })


def assert_same_answers(one, many, records: list[PredictionRecord]) -> None:
    """The scaled-out run (``many``: 3 + 3) spread the work and stored the same profiles
    and alerts as ``one`` (1 + 1), and those alerts are on the workload's shifts."""
    (one, one_work), (many, many_work) = one, many
    # The scaled-out run really spread the work (else it would prove nothing): at least two
    # replicas of each role did some. (A detector that joins the group after the others have
    # read the 24 window events may get none: one read takes up to 50.)
    aggregated = [v for (role, _), v in many_work.items() if role == "aggregate"]
    evaluated = [v for (role, _), v in many_work.items() if role == "detect"]
    assert sum(aggregated) == len(records) and sum(v > 0 for v in aggregated) >= 2, many_work
    assert sum(evaluated) == len(one[0]) and sum(v > 0 for v in evaluated) >= 2, many_work
    assert sum(v for (role, _), v in one_work.items() if role == "detect") == len(one[0])

    profiles_one, alerts_one = one
    profiles_many, alerts_many = many
    assert len(profiles_one) == len(MODELS) * WINDOWS
    assert profiles_many == profiles_one

    # The alerts are exactly on the persistent shifts, the first of each at the shift's
    # first window (a later window may add another check of the same feature), so there
    # is something to compare; and the scaled-out run raised the same ones: same ids,
    # windows, features, checks, states, evidence and incidents.
    first: dict[tuple[str, str], int] = {}
    for a in alerts_one:
        first[a[1], a[3]] = min(a[2], first.get((a[1], a[3]), a[2]))
    assert first == {(m, feature): T0 + w * WINDOW for m, (w, feature) in ALERTED.items()}
    # the null blip is a data-quality break: it fires in its own window
    assert {a[6] for a in alerts_one if a[1] == "ranker"} == {T0 + 2 * WINDOW}
    assert alerts_many == alerts_one
