"""``fleetwatch demo``: real flights through the whole pipeline, with a known fault.

1. Starts an embedded Kafka-protocol broker and Redis, and the aggregator,
   detector and API roles in this process.
2. Trains one arrival-delay classifier per large carrier on January 2013
   (:mod:`service.demo.data`), registers each model with a one-day window (a
   carrier flies ~100-400 flights a day from New York: a 5-minute window would
   hold one or two) and its features' lineage, and uploads its reference
   profile (features and scores of the training month) through the SDK.
3. Replays February and March 2013 through the SDK, day by day, with the
   flights' scheduled departure hour as event time and the models' real scores.
   From 2013-03-04 12:00 to 2013-03-11 12:00 UTC the weather feed is broken:
   ``visib`` arrives null and ``wind_speed`` frozen for every model that uses them.
4. Reads the alerts and incidents back from the REST API and reports them: the
   time from the fault to the first alert per affected model, the incident the
   fault became, and every alert raised outside the fault.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from detectors.policy.floor import EffectFloorPolicy
from detectors.result import TestResult
from detectors.suite import alerting_checks
from sdk import AsyncClient, upload_reference
from service import metrics
from service.api.server import ApiServer
from service.demo import data
from service.demo.fault import WeatherFeedFault
from service.demo.report import as_json, classify, render
from service.profiles.store import Store
from service.runtime.infrastructure import infrastructure, install_signal_handlers
from service.runtime.roles import run_roles
from service.settings import Settings

DAY = 86_400
TRAIN_START = datetime(2013, 1, 1, tzinfo=UTC).timestamp()
REPLAY_START = datetime(2013, 2, 1, tzinfo=UTC).timestamp()
REPLAY_END = datetime(2013, 4, 1, tzinfo=UTC).timestamp()
FAULT = WeatherFeedFault(
    start=datetime(2013, 3, 4, 12, tzinfo=UTC).timestamp(),
    end=datetime(2013, 3, 11, 12, tzinfo=UTC).timestamp(),
)
SECONDS_PER_REPLAYED_DAY = 0.25
#: The pipeline's settings for a replay: one-day windows close 3 s after their last record;
#: a day's records arrive together, so lateness allows the hour a day's replay takes.
PIPELINE_SETTINGS: dict[str, Any] = {"idle_close_seconds": 3.0, "allowed_lateness_seconds": 3600,
                                     "checkpoint_interval_seconds": 0.5}


def _clean(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _records(frame, columns: list[str]) -> list[dict[str, Any]]:
    return [
        {c: _clean(v) for c, v in zip(columns, row, strict=True)}
        for row in frame.itertuples(index=False, name=None)
    ]


async def _naive_alerts(store: Store, model_ids: list[str], alpha: float) -> int:
    """Alerts a per-window policy without FDR control, persistence or grouping raises on
    the same results: every eligible test with p < alpha and its effect over the floor
    (:class:`~detectors.policy.floor.EffectFloorPolicy`)."""
    fields = {f.name for f in dataclasses.fields(TestResult)}
    n = 0
    for m in model_ids:
        reference = await store.reference(m)
        if reference is None:
            continue
        policy = EffectFloorPolicy(alerting_checks(reference), alpha=alpha)
        for member in await store.window_members(m, 0, math.inf):
            stored = await store.results(m, member) or []
            n += len(policy.decide([TestResult(**{k: v for k, v in r.items() if k in fields})
                                    for r in stored]))
    return n


async def _pages(http: httpx.AsyncClient, path: str, size: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        page = (await http.get(path, params={"limit": size, "offset": len(out)})).json()
        out += page
        if len(page) < size:
            return out


async def _wait(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the pipeline did not finish in time")
        await asyncio.sleep(0.2)


def registration(m: data.DemoModel) -> dict[str, Any]:
    """The model's registration: a one-day window and its features' lineage (the weather
    columns come from the weather feed, the others from the flight schedule)."""
    return {
        "model_id": m.model_id, "window_seconds": DAY, "owner": "ops-analytics", "tier": 1,
        "features": {f: {"type": "categorical" if f in data.CATEGORICAL_FEATURES else "numeric",
                         "source": "weather_feed" if f in data.WEATHER_FEATURES else "flight_schedule"}
                     for f in m.features},
    }


#: What the detector tier counted during the replay (the report's ``gate``): metric, label.
GATE_COUNTS = {"fdr_tests": ("fleetwatch_fdr_tests_total", {"family": "features"}),
               "fdr_tests_unfunded": ("fleetwatch_fdr_tests_unfunded_total", {"family": "features"}),
               "fdr_discoveries": ("fleetwatch_fdr_discoveries_total", {"family": "features"})}
GATE_OUTCOMES = {"looks": "fleetwatch_looks_tested_total",
                 "windows_skipped": "fleetwatch_detector_windows_skipped_total"}


def _gate_counts() -> dict[str, Any]:
    """This process's detector-tier counters (:data:`GATE_COUNTS`, :data:`GATE_OUTCOMES`): the
    demo runs the pipeline in-process, so they count its replay."""
    out: dict[str, Any] = {k: metrics.REGISTRY.get_sample_value(name, labels) or 0.0
                           for k, (name, labels) in GATE_COUNTS.items()}
    for key, name in GATE_OUTCOMES.items():
        out[key] = {s.labels[next(iter(s.labels))]: s.value for family in metrics.REGISTRY.collect()
                    for s in family.samples if s.name == name and s.labels}
    return out


def _counted_since(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {k: ({o: n - v.get(o, 0.0) for o, n in after[k].items() if n - v.get(o, 0.0)}
                if isinstance(v, dict) else after[k] - v) for k, v in before.items()}


async def _fault_windows(http: httpx.AsyncClient, model_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Per model, the stored null-rate result of the fault's feature in the first two faulty
    windows (the report's ``fault_windows``: what a late page is read against)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for model_id in model_ids:
        for day in (FAULT.start - FAULT.start % DAY, FAULT.start - FAULT.start % DAY + DAY):
            body = (await http.get(f"/v1/models/{model_id}/drift", params={"window": int(day)})).json()
            for w in body.get("windows", []):
                for r in w["features"].get(FAULT.null_feature, []):
                    if r["check"] == "null_rate":
                        out.setdefault(model_id, []).append(
                            {"window_start": w["window_start"], "source": w["source"],
                             **{k: r.get(k) for k in ("status", "effect_size", "p_value", "floor")}})
    return out


async def replay(settings: Settings, api_url: str, store: Store, api_key: str | None = None,
                  start: float = REPLAY_START, end: float = REPLAY_END) -> dict[str, Any]:
    """Register the models, upload their references and replay the flights of [start, end)
    (default February and March 2013) through the SDK; wait until every record is stored and
    every window evaluated; read the alerts and incidents back. ``api_key``: the key the
    API calls send (when the API needs one)."""
    headers = {} if api_key is None else {"X-API-Key": api_key}
    flights = data.load_flights()
    train = flights[(flights.event_time >= TRAIN_START) & (flights.event_time < REPLAY_START)]
    models = data.train_models(train, REPLAY_START)
    live = flights[(flights.event_time >= start) & (flights.event_time < end)]
    async with httpx.AsyncClient(base_url=api_url, timeout=60, headers=headers) as http:
        for m in models:
            resp = await http.post("/v1/models", json=registration(m))
            resp.raise_for_status()
            own = train[train.carrier == m.carrier]  # in time order (data.load_flights)
            ref = data.feature_frame(m, own).assign(score=data.score(m, own),
                                                    event_time=own.event_time.to_numpy())
            await asyncio.to_thread(upload_reference, api_url, m.model_id, ref,
                                    score_column="score", time_column="event_time",
                                    api_key=api_key)
    produced = {m.model_id: 0 for m in models}
    counted = _gate_counts()
    fault_sent_at: dict[str, float] = {}
    t_replay = time.monotonic()
    async with AsyncClient(settings.kafka_bootstrap, settings.predictions_topic,
                           linger_ms=50, compression_type="gzip") as client:
        for day in np.arange(start, end, DAY):
            today = live[(live.event_time >= day) & (live.event_time < day + DAY)]
            for m in models:
                rows = today[today.carrier == m.carrier]
                if rows.empty:
                    continue
                t = rows.event_time.to_numpy()
                frame = data.feature_frame(m, rows)
                if m.uses_weather:
                    frame = FAULT.apply(frame, t)
                    if FAULT.active(t).any():
                        fault_sent_at.setdefault(m.model_id, time.time())
                scores = data.score(m, frame)
                cols = list(frame.columns)
                for i, (features, s) in enumerate(zip(_records(frame, cols), scores, strict=True)):
                    client.log_prediction(
                        m.model_id, features, model_version="2013.01",
                        prediction_id=f"{rows.index[i]}", event_time=float(t[i]),
                        score=float(s), predicted_label=bool(s >= 0.5),
                    )
                produced[m.model_id] += len(rows)
            await client.flush()
            await asyncio.sleep(SECONDS_PER_REPLAYED_DAY)
        await client.flush()
        dropped = client.stats.dropped

    async with httpx.AsyncClient(base_url=api_url, timeout=60, headers=headers) as http:
        async def stored() -> bool:
            for model_id, n in produced.items():
                body = (await http.get(f"/v1/models/{model_id}/profiles",
                                       params={"limit": 1000})).json()
                if sum(w["count"] for w in body["windows"]) != n:
                    return False
            return await store.pending_events() == 0

        await _wait(stored, timeout=600)  # completion, not a hang detector: slow machines take longer
        alerts = await _pages(http, "/v1/alerts", 1000)
        incidents = await _pages(http, "/v1/incidents", 500)
        naive = await _naive_alerts(store, list(produced), settings.alpha)
        fault_windows = await _fault_windows(http, [m.model_id for m in models if m.uses_weather])
        windows = {
            model_id: len((await http.get(f"/v1/models/{model_id}/profiles",
                                          params={"limit": 1000})).json()["windows"])
            for model_id in produced
        }
    return {
        "models": [{"model_id": m.model_id, "carrier": m.carrier, "uses_weather": m.uses_weather,
                    "features": list(m.features), "records": produced[m.model_id],
                    "windows": windows[m.model_id]} for m in models],
        "records_produced": sum(produced.values()),
        "records_dropped_by_sdk": dropped,
        "replay_seconds": round(time.monotonic() - t_replay, 1),
        "alerts": alerts,
        "incidents": incidents,
        "naive_alerts": naive,
        "fault_sent_at": fault_sent_at,
        "gate": _counted_since(counted, _gate_counts()),
        "fault_windows": fault_windows,
    }


def dashboard_url(settings: Settings, port: int) -> str:
    """The dashboard's URL for a user: under ``public_url`` when one is configured, else on
    the API's listen address (loopback for a wildcard address, which a browser cannot open).

    Examples
    --------
    >>> dashboard_url(Settings(listen_host="0.0.0.0"), 8000)
    'http://127.0.0.1:8000/ui'
    >>> dashboard_url(Settings(listen_host="::1"), 8000)
    'http://[::1]:8000/ui'
    >>> dashboard_url(Settings(public_url="https://fw.example.com/"), 8000)
    'https://fw.example.com/ui'
    """
    if settings.public_url:
        return settings.public_url.rstrip("/") + "/ui"
    wildcard = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
    host = wildcard.get(settings.listen_host, settings.listen_host)
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/ui"


async def _main(settings: Settings, done: Callable[[dict[str, Any], str], None],
                serve: bool = False) -> dict[str, Any]:
    """Run the pipeline, replay the flights and call ``done(result, dashboard URL)``; with
    ``serve``, keep the pipeline and the dashboard up until SIGINT / SIGTERM."""
    stop = asyncio.Event()
    store = Store(settings.redis_url, settings.redis_cluster)
    api = ApiServer(settings, store, port=settings.api_port if serve else 0)
    # Served, the notifier runs too: receivers added while the dashboard is up get paged.
    served = ("aggregator", "detector", "notifier", "api") if serve else ("aggregator", "detector", "api")
    roles = asyncio.create_task(run_roles(settings, served, stop, {"api": api}))
    try:
        while not api.server.started:
            if roles.done():
                roles.result()
            await asyncio.sleep(0.05)
        # The report comes at the end: say at once what runs, for how long, and where to look.
        print(f"fleetwatch demo: pipeline up; replaying Feb-Mar 2013 (a few minutes; longer on a busy "
              f"machine), then the report. Dashboard meanwhile: "
              f"{dashboard_url(settings, api.port)}", file=sys.stderr, flush=True)
        # With authentication on, the replay registers the models with the bootstrap admin key.
        key = settings.api_admin_key if settings.api_auth else None
        admin = None if key is None else key.get_secret_value()
        result = await replay(settings, f"http://127.0.0.1:{api.port}", store, api_key=admin)
        done(result, dashboard_url(settings, api.port))
        if serve:
            install_signal_handlers(stop)
            await stop.wait()
        return result
    finally:
        stop.set()
        await roles
        await store.close()


def run_demo(settings: Settings, json_path: Path | None = None, serve: bool = False) -> dict[str, Any]:
    """Run the demo on an embedded broker and Redis; print the report; return it. With
    ``serve``, the pipeline and the dashboard stay up after the report (on
    ``FLEETWATCH_API_HOST:FLEETWATCH_API_PORT``) until interrupted."""
    t0 = time.monotonic()
    out: dict[str, Any] = {}

    def done(result: dict[str, Any], url: str) -> None:
        report = classify(result, FAULT)
        report["total_seconds"] = round(time.monotonic() - t0, 1)
        report["dashboard_url"] = url
        print(render(report))
        if json_path is not None:
            json_path.write_text(json.dumps(report, indent=2, default=as_json))
        if serve:
            print(f"\nDashboard: {url} (the fault's incident under Incidents); the pipeline keeps running. "
                  "Ctrl-C stops.", flush=True)
        else:
            print("\nThe dashboard served these results at /ui while the demo ran; `fleetwatch demo --serve` "
                  "keeps the pipeline and the dashboard up afterwards and prints their URL.")
        out.update(report)

    with tempfile.TemporaryDirectory(prefix="fleetwatch-demo-") as tmp:
        demo_settings = settings.model_copy(update={
            "kafka_bootstrap": None, "redis_url": None, "data_dir": Path(tmp),
            "embedded_broker_storage": "memory",  # a temporary folder: nothing outlives the run
            **PIPELINE_SETTINGS})
        with infrastructure(demo_settings) as s:
            asyncio.run(_main(s, done, serve))
    return out
