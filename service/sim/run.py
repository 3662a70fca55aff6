"""``fleetwatch simulate``: a simulated fleet with injected incidents through the real pipeline,
scored.

1. Starts an embedded Kafka-protocol broker and Redis, the aggregator and API roles in this
   process (as ``fleetwatch demo``) and two detector replicas and the label joiner as child
   processes (``fleetwatch detect``, ``fleetwatch join``).
2. Builds the fleet (:mod:`service.sim.fleet`) and the incident corpus
   (:mod:`service.sim.incidents`), registers every model over ``POST /v1/models`` with its
   features' lineage, a one-hour window (:data:`WINDOW_SECONDS`; ~90-670 predictions per
   model and window at the default rate) and, for tier-1 models, a ``performance``
   section (labels joined); uploads each model's reference profile
   (``sdk.upload_reference``) from the incident-free day before the scenario. Nothing
   else is set: every floor, weight, check and capacity is the product's default.
3. Streams the scenario through the SDK (``AsyncClient.log_predictions``, then
   ``log_label`` when each tier-1 label is due) one simulated hour at a time: event times
   advance in simulated time, so days pass in minutes of wall clock.
4. Waits until every window is closed, evaluated and released and every label cohort
   judged; reads the alerts and incidents back over the REST API; computes the naive
   policy's pages from the stored per-window test results (and the judged cohorts' results
   from ``GET /v1/models/{id}/performance``); scores both
   (:mod:`service.sim.score`), prints the table and the targets, exports the scorecard
   on ``/metrics`` and writes JSON.

The simulator sets only the fleet's shape (models, traffic, incidents): no floor, FDR
weight, capacity or alerting check of its own, so its scorecard measures the defaults
(docs/simulator.md).
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from detectors.catalog import DEFAULT_ALERTING, matches
from detectors.performance.tasks import PERFORMANCE_CHECKS
from sdk import AsyncClient, upload_reference
from service import metrics
from service.alerting.models import Alert
from service.api.server import ApiServer
from service.profiles.keys import pending_key, window_index_key
from service.profiles.store import Store
from service.runtime.infrastructure import infrastructure
from service.runtime.roles import run_roles
from service.settings import Settings
from service.sim import fleet as fl
from service.sim import incidents as inc
from service.sim import naive as nv
from service.sim import report as rep
from service.sim import score as sc
from service.sim.children import RoleProcesses
from service.sim.report import describe, missed_summary, notes, unmapped_summary
from service.sim.streams import (
    MODEL_VERSION,
    WINDOW_SECONDS,
    SimOptions,
    build_scenario,
    reference_frame,
    registration,
    traffic,
)


async def _wait(remaining: Callable[[], Awaitable[int]], stall: float, what: str,
                children: RoleProcesses | None = None) -> None:
    """Wait until ``remaining()`` (what is left to do) is 0, as long as it keeps falling: a
    loaded machine is slower, not stuck, so the limit is ``stall`` seconds without a new low.

    Raises
    ------
    TimeoutError
        After ``stall`` seconds in which what is left did not fall below its lowest count.
    """
    lowest, since = math.inf, time.monotonic()
    while (left := await remaining()) > 0:
        if children is not None:
            children.check()
        if left < lowest:
            lowest, since = left, time.monotonic()
        elif time.monotonic() - since > stall:
            raise TimeoutError(f"the pipeline made no progress in {stall:g} s: {what} ({left} left)")
        await asyncio.sleep(0.25)


async def _pages(http: httpx.AsyncClient, path: str, size: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        resp = await http.get(path, params={"limit": size, "offset": len(out)})
        resp.raise_for_status()
        page = resp.json()
        out += page
        if len(page) < size:
            return out


async def _register(http: httpx.AsyncClient, api_url: str, scenario: inc.Scenario,
                    opts: SimOptions) -> None:
    for m in scenario.fleet.models:
        (await http.post("/v1/models", json=registration(m, opts))).raise_for_status()

    sem = asyncio.Semaphore(4)

    async def upload(m: fl.ModelSpec) -> None:
        async with sem:
            frame = reference_frame(scenario, m, opts.reference_rows)
            await asyncio.to_thread(upload_reference, api_url, m.model_id, frame, score_column="score")

    await asyncio.gather(*(upload(m) for m in scenario.fleet.models))


@dataclass
class Streamed:
    predictions: dict[str, int]
    windows: dict[str, set[int]]
    labels: int
    dropped: int
    seconds: float


async def _stream(settings: Settings, scenario: inc.Scenario, opts: SimOptions,
                  store: Store, children: RoleProcesses) -> Streamed:
    models = scenario.fleet.models
    produced = {m.model_id: 0 for m in models}
    windows: dict[str, set[int]] = {m.model_id: set() for m in models}
    due: dict[str, list[tuple[float, str, bool]]] = {m.model_id: [] for m in models if m.tier == 1}
    n_labels = 0
    t_start = time.monotonic()
    async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic,
                           labels_topic=settings.labels_topic, linger_ms=20,
                           compression_type="gzip", max_buffer=200_000) as client:
        for hour in range(scenario.days * 24):
            t1 = scenario.start + (hour + 1) * fl.HOUR
            for m in models:
                h = traffic(scenario, m, hour, opts.label_fraction)
                if h.prediction_ids:
                    client.log_predictions(m.model_id, h.features, model_version=MODEL_VERSION,
                                           prediction_ids=h.prediction_ids, event_times=h.event_times,
                                           scores=h.scores)
                    produced[m.model_id] += len(h.prediction_ids)
                    windows[m.model_id].update(int(t // WINDOW_SECONDS) * WINDOW_SECONDS
                                               for t in (h.event_times[0], h.event_times[-1]))
                if m.model_id in due:
                    due[m.model_id] += h.labels
            for model_id, pending in due.items():
                ready = [lab for lab in pending if lab[0] < t1]
                due[model_id] = [lab for lab in pending if lab[0] >= t1]
                for when, pid, y in ready:
                    client.log_label(model_id, pid, y, event_time=when)
                n_labels += len(ready)
            await client.flush(60.0)
            # Keep the producer at most a few simulated hours ahead of the detector, so the
            # roles in this process share the CPU instead of the broker buffering days.
            await _wait(lambda: _behind(store, len(models)), 600, "detector backlog", children)
        for model_id, pending in due.items():
            for when, pid, y in pending:
                client.log_label(model_id, pid, y, event_time=when)
            n_labels += len(pending)
        await client.flush(60.0)
        dropped = client.stats.dropped
    return Streamed(produced, windows, n_labels, dropped, time.monotonic() - t_start)


async def _behind(store: Store, n_models: int) -> int:
    """Detection events beyond the backlog the producer may run ahead by."""
    return max(0, await store.pending_events() - 3 * n_models)


async def _settled(store: Store, streamed: Streamed) -> int:
    """Windows not yet closed, evaluated and released to the alert policy, and detection
    events not yet handled (0: every window settled)."""
    async with store.r.pipeline(transaction=False) as p:
        for m in streamed.windows:
            p.zcard(window_index_key(m))
            p.zcard(pending_key(m))
        counts = await p.execute()
    closed, pending = counts[0::2], counts[1::2]
    unclosed = sum(max(0, len(streamed.windows[m]) - c)
                   for c, m in zip(closed, streamed.windows, strict=True))
    return unclosed + sum(pending) + await store.pending_events()


async def _cohorts_judged(http: httpx.AsyncClient, tier1: list[str]) -> int:
    """Label cohorts of the tier-1 models not judged yet."""
    left = 0
    for m in tier1:
        body = (await http.get(f"/v1/models/{m}/performance", params={"limit": 1000})).json()
        left += sum(c.get("evaluation") is None for c in body["cohorts"])
    return left


Window = tuple[str, float, float, list[dict[str, Any]]]  # model, start, length, stored results


async def _stored_results(store: Store, scenario: inc.Scenario) -> list[Window]:
    """Every window's stored test results (what the naive policy and the evidence read)."""
    out: list[Window] = []
    for m in scenario.fleet.models:
        members = await store.window_members(m.model_id, 0, math.inf)
        results = await store.results_many(m.model_id, members)
        for member, stored in zip(members, results, strict=True):
            length, start, _version = member.split(":", 2)
            out.append((m.model_id, float(start), float(length), stored or []))
    return out


async def _cohort_results(http: httpx.AsyncClient, tier1: list[str]) -> tuple[list[Window], dict[str, Any]]:
    """The judged label cohorts' performance results, as windows of ``__performance__``
    results, and the cohorts themselves (for the report)."""
    windows: list[Window] = []
    cohorts: dict[str, Any] = {}
    for m in tier1:
        body = (await http.get(f"/v1/models/{m}/performance", params={"limit": 1000})).json()
        cohorts[m] = [{"window_start": c["window_start"], "labeled": c["labeled"],
                       "roc_auc": c["realized"].get("roc_auc"),
                       "results": (c.get("evaluation") or {}).get("results", [])} for c in body["cohorts"]]
        for c in body["cohorts"]:
            ev = c.get("evaluation") or {}
            windows.append((m, float(c["window_start"]), float(c["window_end"] - c["window_start"]),
                            [{**r, "feature": inc.PERFORMANCE} for r in ev.get("results", [])]))
    return windows, cohorts


def alerting_check(kinds: dict[str, str]) -> Callable[[str, str], bool]:
    """``(feature, check) -> may it alert`` under the default detector configuration
    (:data:`detectors.catalog.DEFAULT_ALERTING`; performance: the label-joined checks).

    Examples
    --------
    >>> alerting = alerting_check({"a.normal": "normal", "a.cat_low": "cat_low"})
    >>> alerting("a.normal", "psi"), alerting("a.normal", "ks"), alerting("a.cat_low", "js")
    (True, False, True)
    >>> alerting(inc.SCORE, "psi"), alerting(inc.VOLUME, "volume"), alerting("a.cat_low", "null_rate")
    (True, True, True)
    """
    def alerting(feature: str, check: str) -> bool:
        if feature == inc.PERFORMANCE:
            return check in PERFORMANCE_CHECKS
        if feature == inc.SCORE:
            target = "score"
        elif feature == inc.VOLUME:
            target = "window"
        else:
            target = "categorical" if kinds.get(feature) in fl.CATEGORICAL_KINDS else "numeric"
        return any(matches(entry, check, target) for entry in DEFAULT_ALERTING)

    return alerting


def export(card: sc.Scorecard) -> None:
    """Put the scorecard on this process's ``/metrics`` (``fleetwatch_scorecard_*``)."""
    metrics.SCORECARD_ALERT_PRECISION.set(_nan(card.alert_precision))
    metrics.SCORECARD_RECALL.set(_nan(card.recall))
    metrics.SCORECARD_FALSE_PAGES.set(_nan(card.false_pages_per_1000_model_days))
    for group, s in card.groups.items():
        metrics.SCORECARD_MTTD.labels(kind=group).set(_nan(s.mttd_mean_minutes))
        metrics.SCORECARD_KIND_RECALL.labels(kind=group).set(_nan(s.recall))


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


async def _main(settings: Settings, scenario: inc.Scenario, opts: SimOptions) -> dict[str, Any]:
    stop = asyncio.Event()
    store = Store(settings.redis_url, settings.redis_cluster)
    api = ApiServer(settings, store, port=0)
    children = RoleProcesses(settings, settings.data_dir)
    children.start()
    roles = asyncio.create_task(run_roles(settings, ("aggregator", "api"), stop, {"api": api}))
    timing: dict[str, float] = {}
    try:
        while not api.server.started:
            if roles.done():
                roles.result()
            await asyncio.sleep(0.05)
        api_url = f"http://127.0.0.1:{api.port}"
        tier1 = [m.model_id for m in scenario.fleet.models if m.tier == 1]
        async with httpx.AsyncClient(base_url=api_url, timeout=120) as http:
            t = time.monotonic()
            await _register(http, api_url, scenario, opts)
            timing["register_seconds"] = round(time.monotonic() - t, 1)
            streamed = await _stream(settings, scenario, opts, store, children)
            timing["stream_seconds"] = round(streamed.seconds, 1)
            t = time.monotonic()
            await _wait(lambda: _settled(store, streamed), 900, "windows evaluated", children)
            await _wait(lambda: _cohorts_judged(http, tier1), 300, "label cohorts judged", children)
            timing["drain_seconds"] = round(time.monotonic() - t, 1)
            dead = await store.dropped_records(settings.predictions_topic,
                                               [m.model_id for m in scenario.fleet.models])
            alerts = await _pages(http, "/v1/alerts", 1000)
            incidents = await _pages(http, "/v1/incidents", 500)
            windows = await _stored_results(store, scenario)
            perf_windows, cohorts = await _cohort_results(http, tier1)
            windows += perf_windows
            naive = [a for m, start, length, results in windows
                     for a in nv.naive_alerts(m, start, length, results, settings.alpha)]
            ids = [m.model_id for m in scenario.fleet.models]
            kinds = {f.name: f.kind for m in scenario.fleet.models for f in m.features}
            alerting = alerting_check(kinds)
            evidence = {i.id: rep.strongest_evidence(i, windows, alerting) for i in scenario.incidents}
            kinds.update({inc.SCORE: "score", inc.PERFORMANCE: "performance", inc.VOLUME: "volume"})
            fw_card = sc.scorecard("fleetwatch", scenario.incidents,
                                   [sc.from_api(Alert.model_validate(a)) for a in alerts],
                                   ids, scenario.start, scenario.end, WINDOW_SECONDS,
                                   feature_kinds=kinds)
            naive_card = sc.scorecard("naive", scenario.incidents, naive, ids, scenario.start,
                                      scenario.end, WINDOW_SECONDS, grouped=False, feature_kinds=kinds)
            export(fw_card)
            scraped = (await http.get("/metrics")).text
        return {
            "predictions": sum(streamed.predictions.values()),
            "windows": sum(len(w) for w in streamed.windows.values()),
            "labels": streamed.labels,
            "dropped_by_sdk": streamed.dropped,
            # dead-lettered by the aggregator: late (their window had closed) or in the future
            "late_records": sum(d.late for d in dead.values()),
            "future_records": sum(d.future for d in dead.values()),
            "timing": timing,
            "fleetwatch": fw_card,
            "naive": naive_card,
            "alerts": alerts,
            "incidents": [{k: v for k, v in i.items() if k != "alerts"} for i in incidents],
            "evidence": evidence,
            "cohorts": cohorts,
            "metrics_exported": "fleetwatch_scorecard_alert_precision" in scraped,
        }
    finally:
        stop.set()
        await asyncio.to_thread(children.stop)
        await roles
        await store.close()


def sim_settings(settings: Settings, scenario: inc.Scenario, data_dir: Path) -> Settings:
    """The simulator's settings: embedded infrastructure, one-hour FDR slots, windows
    closed promptly."""
    return settings.model_copy(update={
        "kafka_bootstrap": None, "redis_url": None, "data_dir": data_dir,
        "embedded_broker_storage": "memory",  # one run in a temporary folder: nothing to keep
        "window_seconds": WINDOW_SECONDS, "fdr_epoch_seconds": fl.DAY,
        "idle_close_seconds": 3.0, "allowed_lateness_seconds": 600,
        "checkpoint_interval_seconds": 0.5, "performance_eval_interval_seconds": 3.0,
    })


def run_simulation(settings: Settings, opts: SimOptions | None = None,
                   json_path: Path | None = None, quiet: bool = False,
                   scenario: inc.Scenario | None = None) -> dict[str, Any]:
    """Run a scenario through the pipeline on an embedded broker and Redis; print the
    scorecards side by side and the targets; write JSON; return the report.

    Parameters
    ----------
    settings : Settings
        The base settings (the simulator overrides infrastructure and windows:
        :func:`sim_settings`).
    opts : SimOptions, optional
    json_path : Path, optional
        Where to write the report as JSON.
    quiet : bool
        Print nothing.
    scenario : Scenario, optional
        A scenario to run instead of the one ``opts`` builds: it supplies the fleet, the
        days and the incidents; ``opts`` still supplies the PSI floor, the reference rows
        and the label fraction.
    """
    opts = opts or SimOptions()
    t0 = time.monotonic()
    scenario = scenario or build_scenario(opts)
    with tempfile.TemporaryDirectory(prefix="fleetwatch-sim-") as tmp:
        s = sim_settings(settings, scenario, Path(tmp))
        header = describe(opts, scenario, s)
        if not quiet:
            print("\n".join(header), flush=True)
        with infrastructure(s) as live:
            result = asyncio.run(_main(live, scenario, opts))
    fw_card, naive_card = result.pop("fleetwatch"), result.pop("naive")
    total = round(time.monotonic() - t0, 1)
    table = rep.render(fw_card, naive_card)
    lines = [
        f"  streamed {result['predictions']} predictions in {result['windows']} model-windows and "
        f"{result['labels']} labels ({result['dropped_by_sdk']} dropped by the SDK, "
        f"{result['late_records']} dead-lettered as late); "
        f"stream {result['timing']['stream_seconds']} s, drain {result['timing']['drain_seconds']} s",
        "", table, "", "alerts that map to no injected incident, by check and feature kind:",
        unmapped_summary(fw_card), unmapped_summary(naive_card), *notes(scenario),
        "", "incidents fleetwatch missed, with the stored test result closest to alerting:",
        *missed_summary(fw_card, result["evidence"]),
        "", f"total {total} s",
    ]
    if not quiet:
        print("\n".join(lines), flush=True)
    report = {
        "options": asdict(opts),
        "settings": {"window_seconds": WINDOW_SECONDS},
        "header": header,
        "incidents_injected": [asdict(i) for i in scenario.incidents],
        "control_models": list(scenario.control_models()),
        "fleetwatch": fw_card.to_dict(),
        "naive": naive_card.to_dict(),
        "targets": [asdict(t) for t in rep.targets(fw_card)],
        "table": table,
        "total_seconds": total,
        **result,
    }
    if json_path is not None:
        json_path.write_text(json.dumps(report, indent=2, default=str))
    return report
