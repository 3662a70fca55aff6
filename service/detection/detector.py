"""The detector worker: evaluates each closed window against the model's baseline.

Consumes window-closed events from a Redis stream consumer group (so replicas
share the work and a crashed replica's events are reclaimed), runs the tier-1
tests and applies the alert policy (``service.alerting.policy``: FDR gate,
persistence, incidents). Every step is idempotent per window, so
re-processing an event never duplicates an alert or counts a test twice.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

from detectors.baseline import (
    Baseline,
    BaselinePlan,
    choose_baseline,
    merged_baseline,
    plan_baseline,
    pool_window,
    usable,
    window_counts,
)
from detectors.config import DetectorConfig, merge, service_defaults
from detectors.policy.learned import LearnedFloors
from detectors.result import TestResult
from detectors.suite import alerting_checks, evaluate_window
from service import metrics
from service.alerting.policy import AlertPolicy, WindowRef
from service.alerting.silences import SilenceStore
from service.profiles.keys import parse_member
from service.profiles.rollups import GRANULARITIES, Rollups
from service.profiles.store import Store
from service.runtime.outage import REDIS_DOWN, RedisOutage
from service.settings import Settings
from service.stored import ConfigCache, Unreadable, model_configs
from sketches.profile import WindowProfile
from sketches.window import WindowGrid

log = logging.getLogger("fleetwatch.detector")

EVENTS_PER_READ = 50
BASELINE_CACHE_SECONDS = 3_600


def service_config(s: Settings) -> DetectorConfig:
    """The detector defaults of this deployment (``FLEETWATCH_ALPHA``, ``*_FLOOR``)."""
    return service_defaults(
        alpha=s.alpha, floors={"psi": s.psi_floor, "js": s.js_floor, "null_rate": s.null_rate_floor}
    )


async def model_detector_config(store: Store, settings: Settings, model_id: str,
                                role: str = "api") -> DetectorConfig:
    """The service defaults with the model's stored configuration on top (an unreadable
    stored one is counted under ``role`` and left out: the defaults)."""
    stored = await store.own_detector_config(model_id, role)
    return merge(service_config(settings), None if isinstance(stored, Unreadable) else stored)


@dataclass(frozen=True)
class Resolved:
    """A window's baseline resolved (:func:`resolve_baseline`)."""

    baseline: Baseline | None
    volume_history: list[int] | None
    current: WindowProfile
    pooled: int
    learned: LearnedFloors | None


def baseline_plan(settings: Settings, current: WindowProfile, config: DetectorConfig,
                  grid: WindowGrid | None = None) -> BaselinePlan:
    """:func:`detectors.baseline.plan_baseline` for one window under the deployment's
    pooling settings, on the model's window ``grid``."""
    b = config.baseline
    return plan_baseline(b.kind, current.window_start, current.window_seconds, current.count,
                         trailing_seconds=b.trailing_seconds, seasonal_weeks=b.seasonal_weeks,
                         min_records=settings.pool_min_records, pool_windows=settings.pool_max_windows,
                         grid=grid)


def _key(kind: str, current: WindowProfile, ranges: tuple[tuple[int, int], ...]) -> str:
    """Cache key of a merged past baseline: its kind, window length and ranges."""
    return f"{kind}:{current.window_seconds}:{ranges[0][0]}:{ranges[-1][1]}:{len(ranges)}"


async def resolve_baseline(store: Store, settings: Settings, model_id: str, current: WindowProfile,
                           config: DetectorConfig, grid: WindowGrid | None = None) -> Resolved:
    """Plan, fetch, compute: what the window's baseline needs (a pure plan), the reads
    (the reference, its learned floors and the cached merged baselines in one round
    trip; the past windows of what is not cached, two round trips per baseline), the
    choice and merge (pure). A window with fewer records than a test needs is pooled
    with the windows before it (its volume is still the window's own); the volume
    history is the seasonal slot's window counts (the trailing windows' for a window
    with no slot). ``grid``: the model's windows (:attr:`ModelConfig.window_grid`); on one
    in a time zone the seasonal slot is the same local hour or day of the same weekday,
    and for day windows the trailing span reaches the previous local day, whatever DST
    did to their lengths; rollups are looked up on the grid's rollup periods."""
    plan = baseline_plan(settings, current, config, grid)
    keys = {"seasonal": _key("seasonal", current, plan.seasonal) if plan.seasonal else None,
            "trailing": _key("trailing", current, (plan.trailing,)) if plan.trailing else None}
    reads = await store.baseline_reads(model_id, plan.reference, [k for k in keys.values() if k])

    async def past(kind: str, ranges: tuple[tuple[int, int], ...]) -> tuple[Baseline | None, list[int]]:
        key = keys[kind]
        if key in reads.cached:
            raw, counts = reads.cached[key]
            return Baseline(kind, WindowProfile.from_bytes(raw), len(counts)), counts
        profiles = await store.profiles_in(model_id, list(ranges), GRANULARITIES, grid)
        merged = merged_baseline(kind, model_id, profiles)
        if merged is None:
            return None, []
        counts = window_counts(profiles)
        await store.put_cached_baseline(model_id, key, merged.profile.to_bytes(), counts,
                                        BASELINE_CACHE_SECONDS)
        return merged, counts

    seasonal, counts = await past("seasonal", plan.seasonal) if plan.seasonal else (None, [])
    seasonal = usable(seasonal, settings.pool_min_records)
    trailing = None
    if plan.trailing is not None and not (plan.trailing_if_needed and (reads.reference or seasonal)):
        trailing, trailing_counts = await past("trailing", (plan.trailing,))
        if plan.seasonal_missing is not None:
            counts = trailing_counts
    pooled = 0
    if plan.pool is not None:
        preceding = await store.profiles_in(model_id, [plan.pool], (), grid)
        current, pooled = pool_window(current, preceding, settings.pool_min_records)
    baseline = choose_baseline(plan.kind, reads.reference, seasonal, trailing, plan.seasonal_missing)
    learned = reads.floors if baseline is not None and baseline.kind == "reference" else None
    if learned is not None and learned.window_seconds != current.window_seconds:
        learned = None  # learned for windows of another length
    return Resolved(baseline, counts, current, pooled, learned)


def pool_note(resolved: Resolved, settings: Settings) -> str | None:
    """Says in the result that the window was tested together with preceding ones."""
    if resolved.pooled == 0:
        return None
    return (f"tested together with the {resolved.pooled} preceding window(s): {resolved.current.count} "
            f"records (a test needs {settings.pool_min_records})")


async def evaluate_member(
    store: Store, settings: Settings, model_id: str, member: str, config: DetectorConfig | None = None,
    grid: WindowGrid | None = None,
) -> tuple[WindowProfile, Baseline, DetectorConfig, list[TestResult], str | None] | str:
    """Every configured test of one stored window, or the reason it cannot be tested
    (``"no_profile"``, ``"no_baseline"``), under ``config`` (default: the model's
    :func:`model_detector_config`), its baselines found on ``grid`` (the model's
    windows, :func:`resolve_baseline`); with the note saying it was pooled, or None."""
    current = await store.window_profile(model_id, member)
    if current is None:
        return "no_profile"
    if config is None:
        config = await model_detector_config(store, settings, model_id)
    r = await resolve_baseline(store, settings, model_id, current, config, grid)
    if r.baseline is None:
        return "no_baseline"
    results = evaluate_window(r.current, r.baseline.profile, config, r.volume_history, r.learned,
                              records=current.count)
    return current, r.baseline, config, results, pool_note(r, settings)


class Detector:
    """One detector replica."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.policy = AlertPolicy.for_settings(store.r, settings)
        self.silences = SilenceStore(store.r, role="detector")
        self.rollups = Rollups(settings, store)
        # Configurations are read for every window (ttl 0); an unreadable one is counted and
        # replaced by the model's last good one, else the defaults.
        self._models = model_configs(store, settings, "detector", ttl=0)
        self._detector_configs = ConfigCache(self._own_detector_configs, lambda _m: DetectorConfig(), 0)
        self.consumer = f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self.outage = RedisOutage(settings, "detector")

    async def run(self, stop: asyncio.Event) -> None:
        """Evaluate windows until ``stop`` is set. While Redis cannot serve, the read, the
        evaluation or the acknowledgement that failed is tried again
        (:class:`~service.runtime.outage.RedisOutage`); an event is acknowledged only once
        its window is evaluated (re-evaluating one changes nothing)."""
        group = self.settings.detector_group
        await self.outage.call(lambda: self.store.ensure_event_group(group), "create event group")
        while not stop.is_set():
            try:
                events = await self.store.read_events(
                    group, self.consumer, EVENTS_PER_READ, 500,
                    int(self.settings.detector_reclaim_seconds * 1000)
                )
            except REDIS_DOWN as exc:
                await self.outage.pause(exc, "read window events", stop)
                continue
            self.outage.recovered()
            done = []
            for event_id, fields in events:
                try:
                    await self.outage.call(lambda f=fields: self.evaluate(f["model"], f["member"]),
                                           "evaluate window")
                except Exception:
                    metrics.DETECTOR_SKIPPED.labels(reason="policy_error").inc()
                    log.exception("alert policy failed model=%s window=%s",
                                  fields.get("model"), fields.get("member"))
                    await self.release(fields["model"], fields["member"])
                done.append(event_id)
            await self.outage.call(lambda done=done: self.store.ack_events(group, done), "acknowledge events")

    async def _own_detector_configs(self, ids: list[str]) -> dict[str, DetectorConfig | Unreadable | None]:
        return {m: await self.store.own_detector_config(m, "detector") for m in ids}

    async def release(self, model_id: str, member: str) -> None:
        """Take a window the policy failed on off the model's pending set (so it does
        not hold back the model's later windows).

        Never raises: a failure here (Redis down, a member that does not parse) is logged
        with the model and window and counted in
        ``fleetwatch_detector_release_failures_total``; the window then stays pending.
        """
        try:
            start = parse_member(member)[1]
            await self.policy.alerts.record(model_id, start, member, {})
            await self.count(model_id, member, start, {"skipped:policy_error": 1})
        except Exception:
            metrics.DETECTOR_RELEASE_FAILURES.inc()
            log.exception("releasing a failed window failed model=%s window=%s", model_id, member)

    async def count(self, model_id: str, member: str, start: int, increments: dict[str, int],
                    **fields: str | int | float) -> None:
        """Count a window's outcome in the model's status (``GET /v1/models/{id}/status``),
        once per window."""
        await self.store.count_window(model_id, member, start, increments, fields,
                                      start - self.settings.retention_window_seconds)

    async def evaluate(self, model_id: str, member: str) -> list[dict[str, Any]]:
        """Test one closed window and apply the alert policy; the alerts it created or
        changed. A window that cannot be tested is still released to the policy, so
        the model's later windows are not held back."""
        t0 = time.perf_counter()
        model = await self._models.one(model_id)
        try:
            config = merge(service_config(self.settings), await self._detector_configs.one(model_id))
            outcome = await evaluate_member(self.store, self.settings, model_id, member, config,
                                            model.window_grid)
        except REDIS_DOWN:
            raise
        except Exception:
            log.exception("window evaluation failed model=%s window=%s", model_id, member)
            outcome = "error"
        results: list[TestResult] = []
        alerting: dict[str, frozenset[str]] = {}
        weights: dict[str, float] = {}
        length, start, version = parse_member(member)
        if isinstance(outcome, str):
            metrics.DETECTOR_SKIPPED.labels(reason=outcome).inc()
            log.info("window skipped model=%s window=%s reason=%s", model_id, member, outcome)
            await self.count(model_id, member, start, {f"skipped:{outcome}": 1})
        else:
            _current, baseline, config, results, pooled = outcome
            alerting = alerting_checks(baseline.profile, config)
            weights = config.fdr_weights
            await self.store.put_results(
                model_id, member,
                [{**asdict(r), "baseline": baseline.kind, "baseline_note": baseline.note,
                  "pool_note": pooled} for r in results],
                self.settings.retention_window_seconds, outcome[0].count)
        now = time.time()
        alerts = await self.policy.apply(WindowRef(model_id, member, start, length, version),
                                         results, alerting, model, await self.silences.active(now), now,
                                         weights)
        if not isinstance(outcome, str):  # after the policy: a policy error counts as skipped
            await self.count(model_id, member, start, {"evaluated": 1, "records": outcome[0].count},
                             last_window=member, last_window_start=start, last_baseline=outcome[1].kind,
                             last_evaluated_at=now)
        await self.rollups.advance(model_id, model.window_grid if model.window_timezone else length)
        if results:
            metrics.DETECTOR_RUNS.inc()
            metrics.DETECTOR_SECONDS.observe(time.perf_counter() - t0)
        return alerts
