"""Fleet scale: Redis bytes per model-window and per model-day, ingest and detection
throughput, and the projection for a fleet, from one run of the real pipeline.

A fleet of ``--models`` models (default 10), each with 20 features (10 numeric, 10
categorical with 1,000 distinct values: ``benchmarks/workload.py``), 300 records per
5-minute window for ``--windows`` consecutive windows (default 25: the last UTC hour of a
day and the first of the next, so hourly and daily rollups are built), plus one window that
closes the others and stays open. Every model is registered tier 1 with a label-joined
performance configuration (``PerformanceConfig()``, its defaults) and every prediction gets
a label a minute later, so cohorts and the label join are measured too. The predictions,
then the labels, are produced into an embedded broker; then one ``fleetwatch aggregate``,
one ``fleetwatch detect`` and one ``fleetwatch join`` process (default settings: the
workload's shape is the only thing this script sets) run until every window is evaluated,
the rollups of the complete hours and days are built and every label is joined.

Measured:

- Redis bytes: ``MEMORY USAGE <key> SAMPLES 0`` of every key, grouped by what the key
  holds (the layout of ``service/profiles/keys.py``, ``service/alerting/keys.py``,
  ``service/cohorts/keys.py``) and by what it grows with (windows, hourly or daily
  rollups, predictions, models); ``INFO memory`` gives Redis's own overhead on top
  (``used_memory - used_memory_startup`` over the keys' sum).
- Ingest: records per aggregator CPU-second (``/proc/<pid>/stat``, from its first record
  aggregated to its last window closed: decoding, profiling, closing windows and
  checkpoints), and the wall-clock rate.
- Detection: windows and tests per detector CPU-second (reads, tests, the alert policy,
  results, rollups).
- In this process, the serialized size of a window profile of 300 records and of the
  projection's records per window (and of an hour of each), the reference for scaling
  the profile-holding keys to the projected traffic.

With ``--cluster``, the same workload runs again against a local Redis Cluster (three
masters, three replicas: ``service.embedded.redis_cluster``) and a fresh broker, and the
ingest and detection throughput against the cluster are printed beside the single
Redis's, measured in the same run.

Then the projection for ``--fleet-models`` (5,000) models at ``--fleet-rate`` (50,000)
predictions/s with the retention settings of ``service/settings.py``: Redis memory (with
``--replicas`` replicas per primary), aggregator and detector processes, Kafka partitions.

    python benchmarks/fleet_scale.py [--models 10] [--windows 25] [--quick] [--cluster]

Last line: JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import math
import re
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import harness
import numpy as np
import redis
import workload
from redis.cluster import RedisCluster

from sdk import AsyncClient
from sdk.record import PredictionRecord
from sdk.wire import encode_batch
from service.alerting.fdr import EPOCHS_KEPT
from service.alerting.store import SPAN_MEMORY_SECONDS
from service.cohorts.predictions import prediction_ttl
from service.embedded import free_port, redis_cluster
from service.kafka import ensure_topics
from service.profiles.rollups import DAY, HOUR
from service.profiles.store import Store
from service.registry import ModelConfig, PerformanceConfig
from service.runtime.infrastructure import infrastructure
from service.settings import Settings, environment
from sketches.profile import WindowProfile

#: Records per window of the measured workload (one prediction a second per model).
PER_WINDOW = 300
#: A UTC midnight: the measured windows are the hour before it and the hour after.
MIDNIGHT = 1_700_006_400
#: Share of a core each process is planned at in the projection: the rest is headroom for
#: catching up after an outage, rebalances and traffic peaks.
UTILISATION = 0.5
#: Partitions cap the aggregator replicas: enough that a one-hour backlog drains in 15 minutes
#: (replicas x per-process rate - ingest rate >= 4 x ingest rate).
CATCH_UP = 5
POLL_SECONDS = 0.2
#: What only a model with a label-joined performance configuration stores.
LABEL_JOIN_KINDS = frozenset({"cohorts", "label joins (predictions kept)"})
#: Records per message: six a window, so that the closing window's messages move each
#: model's watermark (the median of its last messages' event times) past the others' ends
#: plus the allowed lateness.
MESSAGE_RECORDS = 50
#: Labels buffered in the SDK client between flushes (its buffer holds 100,000).
LABEL_BATCH = 20_000


# -- what each key holds and what it grows with ---------------------------------------------
#: Growth units of the projection: a key of unit ``window`` is kept once per closed window
#: for the window retention, ``gate`` for the gate records' memory, ``cohort`` for the cohort
#: counters' retention (the hourly one), ``hour`` / ``day`` per rollup for their retention,
#: ``prediction`` per joined prediction for the label horizon and a day, ``fdr`` per
#: model-window for the FDR epochs kept, ``model`` once per model, ``fleet`` once.
_MODEL_KEY = re.compile(r"^fw:\{(?P<m>[^}]*)\}:(?P<rest>.*)$")
_MODEL_KINDS: list[tuple[str, str, str]] = [  # (pattern of the part after fw:{m}:, kind, unit)
    (r"p:(\d+):.*", "profiles", ""),  # window or rollup: by its length (below)
    (r"(res|heat):.*", "results", "window"),
    (r"gate:.*", "alert state", "gate"),
    (r"(series|alerting|dq|alerts)", "alert state", "model"),
    (r"pred:.*", "label joins (predictions kept)", "prediction"),
    (r"(coh:.*|cohslices:.*|slicestate:.*|cohorts|cohstate)", "cohorts", "cohort"),
    (r"(labelstats|parked|slicepending|slicevals:.*|cohref)", "cohorts", "model"),
    (r"(idx|counts|counted)", "index keys", "window"),
    (r"idx:(\d+)", "index keys", ""),  # rollup index: by its length (below)
    (r"(pending|status|rolled)", "index keys", "model"),
    (r"(config|ref|edges|floors|detcfg)", "configuration", "model"),
    (r"base:.*", "baselines (cached)", "model"),
]
_GLOBAL_KINDS: list[tuple[str, str, str]] = [  # (pattern of the key after fw: or {fw}:, kind, unit)
    (r"agg:.*", "checkpoints (open windows)", "model"),
    (r"fdr:.*", "FDR", "fdr"),
    (r"(models|fleet:.*|implicit.*)", "index keys", "model"),
    (r"(alert:.*|alerts.*|incident.*|open|open:alerts)", "alert state", "model"),
    (r"(windows|alert-events)", "event streams", "fleet"),
    (r"(outbox|notify|receivers|ratelimit).*", "paging", "fleet"),
]
#: Fleet-wide keys: ``fw:...``, or ``{fw}:...`` where they share one cluster slot.
_FLEET_PREFIX = re.compile(r"^(\{fw\}:|fw:)")


def classify(key: str, window_seconds: int) -> tuple[str, str]:
    """(kind, growth unit) of a Redis key.

    Examples
    --------
    >>> classify("fw:{m1}:p:300:1700006100:1", 300), classify("fw:{m1}:p:3600:1700002800:1", 300)
    (('window profiles', 'window'), ('hourly rollups', 'hour'))
    >>> classify("fw:{m1}:idx:86400", 300), classify("fw:agg:fw.predictions:3", 300)
    (('index keys', 'day'), ('checkpoints (open windows)', 'model'))
    >>> classify("fw:{m1}:pred:w3-p7", 300), classify("{fw}:fdr:19676:used", 300)
    (('label joins (predictions kept)', 'prediction'), ('FDR', 'fdr'))
    """
    if m := _MODEL_KEY.match(key):
        rest = m["rest"]
        for pattern, kind, unit in _MODEL_KINDS:
            if found := re.fullmatch(pattern, rest):
                if unit:
                    return kind, unit
                length = int(found[1])
                if length == window_seconds:
                    return ("window profiles" if kind == "profiles" else kind), "window"
                rollup = {HOUR: "hour", DAY: "day"}.get(length, "model")
                return ({"hour": "hourly rollups", "day": "daily rollups"}.get(rollup, "rollups")
                        if kind == "profiles" else kind), rollup
        return "other", "model"
    name = _FLEET_PREFIX.sub("", key)
    for pattern, kind, unit in _GLOBAL_KINDS:
        if re.fullmatch(pattern, name):
            return kind, unit
    return "other", "fleet"


@dataclass
class Footprint:
    """Redis bytes of one run, by (kind, unit), with the run's counts of each unit."""

    bytes: dict[tuple[str, str], int]
    keys: dict[tuple[str, str], int]
    units: dict[str, int]  # windows, hours, days, predictions, ... of the run
    used_memory: int  # INFO memory: used_memory - used_memory_startup
    info: dict[str, float]

    @property
    def total(self) -> int:
        return sum(self.bytes.values())

    @property
    def overhead(self) -> float:
        """Redis's memory over the keys' MEMORY USAGE (allocator and dictionaries)."""
        return self.used_memory / self.total

    def per_unit(self) -> dict[tuple[str, str], float]:
        """Bytes per unit (per window, per rollup, per prediction, per model, ...)."""
        return {k: b / max(self.units[k[1]], 1) for k, b in self.bytes.items()}


def footprint(r: redis.Redis, window_seconds: int, units: dict[str, int]) -> Footprint:
    sizes: dict[tuple[str, str], int] = Counter()
    keys: dict[tuple[str, str], int] = Counter()
    counts: dict[str, int] = Counter()
    for raw in r.scan_iter(count=1_000):
        key = raw.decode()
        kind, unit = classify(key, window_seconds)
        sizes[kind, unit] += r.memory_usage(key, samples=0) or 0
        keys[kind, unit] += 1
        if kind in ("hourly rollups", "daily rollups") or unit == "prediction":
            counts[unit] += 1
    info = r.info("memory")
    return Footprint(dict(sizes), dict(keys), {**units, **counts},
                     info["used_memory"] - info["used_memory_startup"],
                     {k: info[k] for k in ("used_memory", "used_memory_startup", "used_memory_dataset",
                                           "used_memory_overhead", "mem_fragmentation_ratio")})


# -- the workload --------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """The measured fleet: ``models`` x ``windows`` closed windows of ``PER_WINDOW`` records,
    starting ``first`` (one more window, after them, closes them and stays open)."""

    models: int
    windows: int
    window_seconds: int = 300

    @property
    def first(self) -> int:
        return MIDNIGHT - (self.windows // 2) * self.window_seconds

    @property
    def starts(self) -> list[int]:
        return [self.first + i * self.window_seconds for i in range(self.windows)]

    def rollups(self, granularity: int) -> int:
        """Rollups of ``granularity`` per model the detector builds: the periods holding a
        window that end at or before the last closed window's start."""
        last = self.starts[-1]
        return len({s // granularity for s in self.starts if (s // granularity + 1) * granularity <= last})

    @property
    def model_ids(self) -> list[str]:
        return [f"model-{i}" for i in range(self.models)]


def predictions(shape: Shape) -> Iterator[list[PredictionRecord]]:
    """Each window's records (and the closing window's), prediction ids unique in the fleet."""
    for w, start in enumerate([*shape.starts, shape.starts[-1] + shape.window_seconds]):
        yield workload.records(shape.models, PER_WINDOW, t0=start, seed=w,
                               window_seconds=shape.window_seconds, id_prefix=f"w{w}-")


async def produce(s: Settings, shape: Shape) -> tuple[int, int]:
    """The predictions (per-model batches in event-time order, as a model server sends them),
    then a label for each closed window's prediction (Bernoulli of its score) through the
    SDK; (records, labels)."""
    recs = sorted((r for batch in predictions(shape) for r in batch), key=lambda r: r.event_time)
    await workload.produce(s.kafka_bootstrap, s.predictions_topic, recs, MESSAGE_RECORDS)
    rng = np.random.default_rng(11)
    end = shape.starts[-1] + shape.window_seconds
    labelled = [r for r in recs if r.event_time < end]
    outcomes = rng.random(len(labelled)) < np.array([r.score for r in labelled])
    async with AsyncClient(s.kafka_bootstrap, s.predictions_topic, labels_topic=s.labels_topic) as client:
        for i, (r, y) in enumerate(zip(labelled, outcomes.tolist(), strict=True)):
            client.log_label(r.model_id, r.prediction_id, int(y), event_time=r.event_time + 60)
            last = i % LABEL_BATCH == LABEL_BATCH - 1 or i == len(labelled) - 1  # within its buffer
            if last and not await client.flush(120):
                raise SystemExit("labels not delivered")
    return len(recs), len(labelled)


async def register(s: Settings, shape: Shape) -> None:
    """Every model tier 1 with the default label-joined performance configuration."""
    store = Store(s.redis_url, s.redis_cluster)
    try:
        for m in shape.model_ids:
            await store.put_model_config(m, ModelConfig(tier=1, performance=PerformanceConfig()))
    finally:
        await store.close()


# -- the run -------------------------------------------------------------------------------
@dataclass
class Throughput:
    records: int
    aggregator_cpu_s: float
    ingest_wall_s: float
    windows: int
    tests: int
    detector_cpu_s: float
    joiner_cpu_s: float
    labels: int
    wall_s: float

    @property
    def records_per_cpu_s(self) -> float:
        return self.records / self.aggregator_cpu_s

    @property
    def windows_per_cpu_s(self) -> float:
        return self.windows / self.detector_cpu_s

    @property
    def tests_per_cpu_s(self) -> float:
        return self.tests / self.detector_cpu_s

    def summary(self) -> dict[str, float]:
        return {"records": self.records,
                "records_per_aggregator_cpu_s": round(self.records_per_cpu_s),
                "records_per_s_wall": round(self.records / self.ingest_wall_s),
                "aggregator_cpu_s": round(self.aggregator_cpu_s, 2),
                "windows_evaluated": self.windows, "tests": self.tests,
                "windows_per_detector_cpu_s": round(self.windows_per_cpu_s, 2),
                "tests_per_detector_cpu_s": round(self.tests_per_cpu_s),
                "detector_cpu_ms_per_window": round(1000 / self.windows_per_cpu_s, 1),
                "detector_cpu_s": round(self.detector_cpu_s, 2),
                "labels_joined": self.labels, "joiner_cpu_s": round(self.joiner_cpu_s, 2),
                "joiner_cpu_ms_per_label": round(1000 * self.joiner_cpu_s / max(self.labels, 1), 3),
                "wall_s": round(self.wall_s, 1)}


class Roles:
    """One aggregator, one detector and one joiner process on ``s``'s Kafka and Redis."""

    COMMANDS = ("aggregate", "detect", "join")

    def __init__(self, s: Settings) -> None:
        env = environment(s)
        env.pop("FLEETWATCH_METRICS_PORT", None)
        self.ports = {c: free_port() for c in self.COMMANDS}
        self.logs = {c: s.data_dir / f"{c}.log" for c in self.COMMANDS}
        self.procs = {c: harness.role(c, env, self.ports[c], self.logs[c]) for c in self.COMMANDS}

    def counter(self, command: str, name: str) -> float:
        return harness.counter(self.ports[command], name) or 0.0

    def cpu(self, command: str) -> float:
        return harness.cpu_seconds(self.procs[command].pid)

    def check(self) -> None:
        for c, p in self.procs.items():
            if p.poll() is not None:
                tail = self.logs[c].read_text(errors="replace")[-3000:]
                raise SystemExit(f"fleetwatch {c} exited with {p.returncode}:\n{tail}")

    def wait_started(self, deadline: float) -> None:
        """Until every process answers on its metrics port (its imports done)."""
        while any(harness.counter(p, "fleetwatch_records_aggregated") is None for p in self.ports.values()):
            self.check()
            if time.monotonic() > deadline:
                raise SystemExit("roles did not start")
            time.sleep(POLL_SECONDS)

    def stop(self) -> None:
        for p in self.procs.values():
            p.terminate()
        for p in self.procs.values():
            p.wait(60)


def done_in_redis(r, shape: Shape, labels: int) -> tuple[bool, int, int]:
    """(every window counted, its complete hours and days rolled up, every label joined;
    windows counted; labels joined)."""
    counted = joined = 0
    rolled = True
    for m in shape.model_ids:
        counted += r.zcard(f"fw:{{{m}}}:counted")
        joined += int(r.hget(f"fw:{{{m}}}:labelstats", "joined") or 0)
        rolled = rolled and all(r.zcard(f"fw:{{{m}}}:idx:{g}") >= shape.rollups(g) for g in (HOUR, DAY))
    return counted >= shape.models * shape.windows and rolled and joined >= labels, counted, joined


def run_pipeline(s: Settings, shape: Shape, client, timeout: float) -> Throughput:
    """Register the fleet, produce its records and labels, and run the roles until done."""
    asyncio.run(register(s, shape))
    asyncio.run(ensure_topics(s))
    records, labels = asyncio.run(produce(s, shape))
    roles = Roles(s)
    try:
        deadline = time.monotonic() + timeout
        roles.wait_started(deadline)
        t0 = time.perf_counter()
        cpu0 = {c: roles.cpu(c) for c in Roles.COMMANDS}
        t_first = t_agg = agg_cpu = None
        while True:
            roles.check()
            aggregated = roles.counter("aggregate", "fleetwatch_records_aggregated")
            closed = roles.counter("aggregate", "fleetwatch_windows_closed")
            now = time.perf_counter()
            if aggregated and t_first is None:
                t_first = now
            if agg_cpu is None and aggregated >= records and closed >= shape.models * shape.windows:
                t_agg, agg_cpu = now, roles.cpu("aggregate") - cpu0["aggregate"]
            finished, counted, joined = done_in_redis(client, shape, labels)
            if agg_cpu is not None and finished:
                break
            if time.monotonic() > deadline:
                for m in shape.model_ids:
                    print(m, client.hgetall(f"fw:{{{m}}}:labelstats"), client.zcard(f"fw:{{{m}}}:idx:3600"),
                          client.zcard(f"fw:{{{m}}}:idx:86400"), client.hgetall(f"fw:{{{m}}}:status"))
                raise SystemExit(f"not done in {timeout:.0f} s: {aggregated:.0f}/{records} records, "
                                 f"{counted}/{shape.models * shape.windows} windows, "
                                 f"{joined}/{labels} labels")
            time.sleep(POLL_SECONDS)
        det_cpu = roles.cpu("detect") - cpu0["detect"]
        join_cpu = roles.cpu("join") - cpu0["join"]
        wall = time.perf_counter() - t0
    finally:
        roles.stop()
    tests = sum(len(json.loads(client.get(k))) for k in client.scan_iter(match="fw:{*}:res:*", count=1_000))
    return Throughput(records, agg_cpu, max(t_agg - t_first, 1e-3), counted, tests, det_cpu, join_cpu,
                      joined, wall)


# -- the reference measured in process: profile sizes by records per window ----------------
def wire_bytes_per_record(n: int = MESSAGE_RECORDS) -> tuple[float, float]:
    """Encoded bytes per workload record in a message of ``n`` records: as produced, and
    gzip-compressed (the broker stores what the producer compressed)."""
    blob = encode_batch(workload.records(1, n, t0=MIDNIGHT))
    return len(blob) / n, len(gzip.compress(blob)) / n


def profile_bytes(n: int, seed: int = 5) -> int:
    """Serialized size of one model's window profile of ``n`` workload records."""
    p = WindowProfile("m", MIDNIGHT, 300)
    p.add_records(workload.records(1, n, t0=MIDNIGHT, seed=seed))
    return len(p.to_bytes())


# -- the projection ------------------------------------------------------------------------
@dataclass
class Projection:
    models: int
    predictions_per_s: float
    records_per_window: float
    window_profile_scale: float  # profile bytes at the fleet's records per window / at 300
    rollup_profile_scale: float  # the same for an hour of records
    replicas: int
    retained: dict[str, float]  # units kept per model, by unit
    per_model_bytes: dict[str, float] = field(default_factory=dict)  # by kind, without labels
    #: What a label-joined model adds, by kind: its cohorts and its predictions kept for the
    #: join (at the default sample_rate, 1.0: the share scales the predictions' bytes).
    label_join_bytes_per_model: dict[str, float] = field(default_factory=dict)
    #: Bytes of one unit of each kind at the fleet's records per window ("window profiles
    #: per window": one closed window's profile), for recomputing with other retentions.
    per_unit_bytes: dict[str, float] = field(default_factory=dict)
    fleet_bytes: float = 0.0
    overhead: float = 1.0
    aggregators: int = 0
    detectors: int = 0
    partitions: int = 0
    #: Label joiners if every prediction is kept and labelled (the joiner's CPU per
    #: prediction and label measured; sample_rate scales it).
    joiners_every_model_label_joined: int = 0

    def memory(self, joined_share: float) -> dict[str, float]:
        data = (self.models * (sum(self.per_model_bytes.values())
                               + joined_share * sum(self.label_join_bytes_per_model.values()))
                + self.fleet_bytes)
        used = data * self.overhead
        return {"dataset_gb": round(data / 1e9, 1), "used_memory_gb": round(used / 1e9, 1),
                "with_replicas_gb": round(used * (1 + self.replicas) / 1e9, 1)}


def retained_units(s: Settings, records_per_window: float) -> dict[str, float]:
    """Units of each growth kind one model keeps at steady state, from the settings."""
    w = s.window_seconds
    kept = prediction_ttl(PerformanceConfig().label_horizon_seconds, w)
    return {"window": s.retention_window_seconds / w, "gate": SPAN_MEMORY_SECONDS / w,
            "cohort": s.retention_hourly_seconds / w, "hour": s.retention_hourly_seconds / HOUR,
            "day": s.retention_daily_seconds / DAY, "fdr": EPOCHS_KEPT * s.fdr_epoch_seconds / w,
            "prediction": records_per_window / w * kept,
            "model": 1.0}


def project(fp: Footprint, tp: Throughput, s: Settings, shape: Shape, models: int, rate: float,
            replicas: int, sizes: dict[int, int]) -> Projection:
    per_window_records = rate * s.window_seconds / models
    p = Projection(models, rate, per_window_records,
                   sizes[round(per_window_records)] / sizes[PER_WINDOW],
                   sizes[round(per_window_records * HOUR / s.window_seconds)]
                   / sizes[PER_WINDOW * HOUR // s.window_seconds],
                   replicas, retained_units(s, per_window_records), overhead=fp.overhead)
    scale = {"window profiles": p.window_profile_scale, "checkpoints (open windows)": p.window_profile_scale,
             "hourly rollups": p.rollup_profile_scale, "daily rollups": p.rollup_profile_scale}
    per_model: dict[str, float] = defaultdict(float)
    joined: dict[str, float] = defaultdict(float)
    for (kind, unit), b in fp.per_unit().items():
        if unit == "fleet":
            p.fleet_bytes += b
            continue
        per_model_unit = b / shape.models if unit == "model" else b
        p.per_unit_bytes[f"{kind} per {unit}"] = round(per_model_unit * scale.get(kind, 1.0))
        grown = per_model_unit * p.retained[unit] * scale.get(kind, 1.0)
        (joined if kind in LABEL_JOIN_KINDS else per_model)[kind] += grown
    p.per_model_bytes = {k: round(v) for k, v in sorted(per_model.items())}
    p.label_join_bytes_per_model = {k: round(v) for k, v in sorted(joined.items())}
    p.aggregators = math.ceil(rate / (tp.records_per_cpu_s * UTILISATION))
    windows_per_s = models / s.window_seconds
    p.detectors = math.ceil(windows_per_s / (tp.windows_per_cpu_s * UTILISATION))
    p.partitions = math.ceil(CATCH_UP * rate / tp.records_per_cpu_s / p.aggregators) * p.aggregators
    if tp.labels:
        p.joiners_every_model_label_joined = math.ceil(rate * tp.joiner_cpu_s / tp.labels / UTILISATION)
    return p


def per_model_window(fp: Footprint, shape: Shape) -> dict[str, float]:
    """Bytes per model-window by kind: everything the run stored, over its model-windows."""
    out: dict[str, float] = defaultdict(float)
    for (kind, _unit), b in fp.bytes.items():
        out[kind] += b / (shape.models * shape.windows)
    return {k: round(v) for k, v in sorted(out.items())}


def per_model_day(fp: Footprint, s: Settings) -> dict[str, float]:
    """What one day of one model adds (at 300 records per window), by kind: per-unit bytes
    times the units a day makes (windows, rollups, predictions); per-model and fleet keys
    are not counted."""
    day_units = {"window": DAY / s.window_seconds, "gate": DAY / s.window_seconds,
                 "cohort": DAY / s.window_seconds, "fdr": DAY / s.window_seconds, "hour": DAY / HOUR,
                 "day": 1.0, "prediction": PER_WINDOW * DAY / s.window_seconds}
    out: dict[str, float] = defaultdict(float)
    for (kind, unit), b in fp.per_unit().items():
        if unit in day_units:
            out[kind] += b * day_units[unit]
    return {k: round(v) for k, v in sorted(out.items())}


# -- main ----------------------------------------------------------------------------------
def measure(base: Settings, shape: Shape, timeout: float) -> tuple[Footprint, Throughput, Settings]:
    with infrastructure(base) as s:
        client = redis.Redis.from_url(s.redis_url)
        tp = run_pipeline(s, shape, client, timeout)
        units = {"window": shape.models * shape.windows, "gate": shape.models * shape.windows,
                 "cohort": shape.models * shape.windows, "fdr": shape.models * shape.windows,
                 "model": 1, "fleet": 1}
        fp = footprint(client, s.window_seconds, units)
        client.close()
    return fp, tp, s


def measure_cluster(data_dir: Path, shape: Shape, timeout: float) -> Throughput:
    """The same workload's throughput on a local Redis Cluster (three masters, a replica
    each: :func:`service.embedded.redis_cluster`) and a fresh broker."""
    cluster = redis_cluster(data_dir / "redis-cluster")
    cluster.start()
    try:
        base = Settings(kafka_bootstrap=None, redis_url=cluster.url, redis_cluster=True,
                        data_dir=data_dir / "cluster", embedded_broker_storage="memory")
        with infrastructure(base) as s:
            client = RedisCluster.from_url(s.redis_url)
            try:
                return run_pipeline(s, shape, client, timeout)
            finally:
                client.close()
    finally:
        cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--windows", type=int, default=25,
                    help="closed windows per model, centred on a UTC midnight")
    ap.add_argument("--quick", action="store_true", help="2 models x 7 windows (a test of the script)")
    ap.add_argument("--cluster", action="store_true",
                    help="also run against a local Redis Cluster and compare the throughput")
    ap.add_argument("--fleet-models", type=int, default=5_000)
    ap.add_argument("--fleet-rate", type=float, default=50_000, help="predictions/s of the fleet")
    ap.add_argument("--replicas", type=int, default=1, help="Redis replicas per primary")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    shape = Shape(2, 7) if args.quick else Shape(args.models, args.windows)
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        base = Settings(kafka_bootstrap=None, redis_url=None, data_dir=Path(tmp) / "standalone",
                        embedded_broker_storage="memory")  # measures fleetwatch, not the broker's disk
        fp, tp, s = measure(base, shape, args.timeout)
        cluster = measure_cluster(Path(tmp), shape, args.timeout) if args.cluster else None
    fleet_window = args.fleet_rate * s.window_seconds / args.fleet_models
    hour = HOUR / s.window_seconds
    sizes = {n: profile_bytes(n) for n in {PER_WINDOW, round(PER_WINDOW * hour), round(fleet_window),
                                           round(fleet_window * hour)}}
    proj = project(fp, tp, s, shape, args.fleet_models, args.fleet_rate, args.replicas, sizes)
    mw, md = per_model_window(fp, shape), per_model_day(fp, s)
    wire = wire_bytes_per_record()
    none, every = proj.memory(0.0), proj.memory(1.0)
    result = {
        "models": shape.models, "windows_per_model": shape.windows, "records_per_window": PER_WINDOW,
        "records_per_message": MESSAGE_RECORDS, "features": 20,
        "redis_bytes_per_model_window": round(fp.total / (shape.models * shape.windows)),
        "redis_bytes_per_model_window_by_kind": mw,
        "redis_bytes_per_model_day": sum(md.values()),
        "redis_bytes_per_model_day_by_kind": md,
        "redis_bytes_per_model_day_without_label_joins": sum(
            v for k, v in md.items() if k not in LABEL_JOIN_KINDS),
        "redis_keys_by_kind": {f"{k} ({u})": n for (k, u), n in sorted(fp.keys.items())},
        "redis_memory_usage_bytes": fp.total, "redis_used_memory_bytes": fp.used_memory,
        "redis_overhead_ratio": round(fp.overhead, 3), "redis_info_memory": fp.info,
        "profile_bytes_by_records": {str(n): b for n, b in sorted(sizes.items())},
        "wire_bytes_per_record": {"raw": round(wire[0], 1), "gzip": round(wire[1], 1)},
        "standalone": tp.summary(),
        **({} if cluster is None else {
            "cluster": cluster.summary(),
            "cluster_to_standalone_records_per_aggregator_cpu_s": round(
                cluster.records_per_cpu_s / tp.records_per_cpu_s, 3),
            "cluster_to_standalone_windows_per_detector_cpu_s": round(
                cluster.windows_per_cpu_s / tp.windows_per_cpu_s, 3)}),
        "settings": {"window_seconds": s.window_seconds,
                     "retention_window_seconds": s.retention_window_seconds,
                     "retention_hourly_seconds": s.retention_hourly_seconds,
                     "retention_daily_seconds": s.retention_daily_seconds,
                     "fdr_epoch_seconds": s.fdr_epoch_seconds,
                     "label_horizon_seconds": PerformanceConfig().label_horizon_seconds},
        "projection": {**{k: v for k, v in asdict(proj).items() if k != "retained"},
                       "retained_per_model": {k: round(v) for k, v in proj.retained.items()},
                       "utilisation": UTILISATION,
                       "memory_no_label_joins": none, "memory_every_model_label_joined": every},
        "wall_s": round(time.perf_counter() - t_start, 1),
    }
    print(f"Redis: {result['redis_bytes_per_model_window']:,} bytes per model-window, "
          f"{result['redis_bytes_per_model_day']:,} bytes per model-day "
          f"({result['redis_bytes_per_model_day_without_label_joins']:,} without label joins) "
          f"(overhead x{fp.overhead:.2f}); ingest {tp.records_per_cpu_s:,.0f} records per aggregator "
          f"CPU-second; detection {tp.windows_per_cpu_s:.1f} windows ({tp.tests_per_cpu_s:,.0f} tests) "
          f"per detector CPU-second")
    print(f"projection, {args.fleet_models:,} models at {args.fleet_rate:,.0f} predictions/s "
          f"({fleet_window:,.0f} records per window): Redis {none['used_memory_gb']} GB "
          f"({none['with_replicas_gb']} GB with {args.replicas} replica(s) per primary; every model "
          f"label-joined: {every['used_memory_gb']} / {every['with_replicas_gb']} GB), "
          f"{proj.aggregators} aggregators, {proj.detectors} detectors, {proj.partitions} partitions")
    if cluster is not None:
        print(f"Redis Cluster (3 masters + 3 replicas) vs one Redis, same run: ingest "
              f"{cluster.records_per_cpu_s:,.0f} vs {tp.records_per_cpu_s:,.0f} records per aggregator "
              f"CPU-second, detection {cluster.windows_per_cpu_s:.1f} vs {tp.windows_per_cpu_s:.1f} "
              f"windows per detector CPU-second")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
