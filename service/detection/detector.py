"""The detector worker: evaluates each closed window against the model's baseline.

Consumes window-closed events from a Redis stream consumer group (so replicas
share the work and a crashed replica's events are reclaimed), runs the tier-1
tests and applies the alert policy (``service.alerting.policy``: FDR gate,
persistence, incidents). Every step is idempotent per window, so
re-processing an event never duplicates an alert or counts a test twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections import OrderedDict
from dataclasses import asdict

from redis.exceptions import ResponseError

from detectors.config import DetectorConfig, merge
from detectors.quality.looks import LookPlan, look_plan, window_look_plan
from detectors.result import TestResult
from detectors.suite import alerting_checks
from service import metrics
from service.alerting.models import Alert
from service.alerting.policy import AlertPolicy, WindowRef
from service.alerting.silences import SilenceStore
from service.profiles.evaluation import UNSETTLED, evaluate_member, resolve_baseline, service_config
from service.profiles.keys import parse_member
from service.profiles.looks import WindowLook
from service.profiles.rollups import Rollups
from service.profiles.store import Store
from service.runtime.outage import REDIS_DOWN, RedisOutage
from service.settings import Settings
from service.stored import ConfigCache, Unreadable, model_configs
from sketches.profile import WindowProfile

log = logging.getLogger("fleetwatch.detector")

EVENTS_PER_READ = 50
LOOK_PLANS = 4_096  # open windows whose look plan a detector keeps
READ_RETRY_SECONDS = 1.0  # after a read of the events fails with an error answer


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
        # per open window looked at, the plan of its looks and its alerting checks (oldest first)
        self._look_plans: OrderedDict[tuple[str, str], tuple[LookPlan, dict[str, frozenset[str]]]]
        self._look_plans = OrderedDict()
        # Events whose window waits for the fleet (read, not acknowledged): id -> (fields, until).
        self._deferred: dict[bytes, tuple[dict[str, str], float]] = {}

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
            except ResponseError as exc:  # the stream or the group was deleted (NOGROUP), ...
                await self._read_failed(exc, group, stop)
                continue
            self.outage.recovered()
            wait = self.settings.detector_fleet_wait_seconds > 0
            done = [event_id for event_id, fields in events
                    if event_id not in self._deferred and await self._handle(event_id, fields, wait)]
            done += await self._settled()
            metrics.DETECTOR_WAITING.set(len(self._deferred))
            await self.outage.call(lambda done=done: self.store.ack_events(group, done), "acknowledge events")

    async def _read_failed(self, exc: ResponseError, group: str, stop: asyncio.Event) -> None:
        """Reading the events failed with an error answer, not an outage: log and count it,
        create the consumer group again (it is gone when someone deleted the stream), and
        go on after a second (or when ``stop`` is set) rather than end the worker."""
        metrics.DETECTOR_READ_ERRORS.inc()
        log.error("reading window events failed (%s); creating the consumer group again", exc)
        with contextlib.suppress(*REDIS_DOWN, ResponseError):
            await self.store.ensure_event_group(group)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), READ_RETRY_SECONDS)

    async def _handle(self, event_id: bytes, fields: dict[str, str], wait_for_fleet: bool) -> bool:
        """Evaluate one window-closed event (or apply a look at an open window); False if it
        waits for the fleet (kept, not acknowledged, until :meth:`_settled` takes it)."""
        if "look" in fields:
            await self._handle_look(fields)
            return True
        try:
            alerts = await self.outage.call(
                lambda: self.evaluate(fields["model"], fields["member"], wait_for_fleet), "evaluate window")
        except Exception:
            metrics.DETECTOR_SKIPPED.labels(reason="policy_error").inc()
            log.exception("alert policy failed model=%s window=%s", fields.get("model"), fields.get("member"))
            await self.release(fields["model"], fields["member"])
            return True
        if alerts is None:
            self._deferred[event_id] = (fields, time.monotonic() + self.settings.detector_fleet_wait_seconds)
            return False
        return True

    async def _handle_look(self, fields: dict[str, str]) -> None:
        """Apply one look event; never raises but while Redis cannot serve (then the look
        is tried again like a window)."""
        try:
            look = WindowLook.from_fields(fields)
        except Exception as exc:  # ValueError naming the field; anything else is as bad
            metrics.LOOKS_TESTED.labels(outcome="unusable").inc()
            log.error("look event does not parse (%s): dropped", exc)
            return
        try:
            outcome = await self.outage.call(lambda: self.look(look), "apply a look")
        except Exception:
            outcome = "unusable"
            log.exception("look failed model=%s window=%s", look.model_id, look.member)
        metrics.LOOKS_TESTED.labels(outcome=outcome if isinstance(outcome, str) else
                                    "fired" if outcome else "quiet").inc()

    async def look(self, look: WindowLook) -> list[Alert] | str:
        """The look tests of ``look`` (:class:`~detectors.quality.looks.LookPlan`) against
        the window's baseline, through the alert policy (:meth:`AlertPolicy.look`): the
        alerts it fired or changed, or why it decided nothing (``"unusable"``: the window has
        no baseline; the policy's reasons). The window's baseline is resolved at its first
        look and its plan kept for the next ones (:data:`LOOK_PLANS` windows)."""
        model = await self._models.one(look.model_id)
        length, start, version = parse_member(look.member)
        key = (look.model_id, look.member)
        planned = self._look_plans.get(key)
        if planned is None:
            config = merge(service_config(self.settings), await self._detector_configs.one(look.model_id))
            current = WindowProfile(look.model_id, start, length)
            current.count = look.records
            r = await resolve_baseline(self.store, self.settings, look.model_id, current, config,
                                       model.window_grid)
            if r is None or r.baseline is None:
                return "unusable"
            planned = (look_plan(r.baseline.profile, config, r.learned),
                       alerting_checks(r.baseline.profile, config))
            self._look_plans[key] = planned
            while len(self._look_plans) > LOOK_PLANS:
                self._look_plans.popitem(last=False)
        else:
            self._look_plans.move_to_end(key)
        plan, alerting = planned
        now = time.time()
        return await self.policy.look(WindowRef(look.model_id, look.member, start, length, version),
                                      plan.tests(look.counts, look.records), alerting, model,
                                      await self.silences.active(now), now, look.at, look.prior_end)

    async def _settled(self) -> list[bytes]:
        """Evaluate the waiting events whose window the fleet has settled, or whose wait is
        over (with the models that closed it); their ids."""
        now = time.monotonic()
        unsettled: dict[tuple[int, int], int] = {}
        done = []
        for event_id, (fields, until) in list(self._deferred.items()):
            length, start, _version = parse_member(fields["member"])
            if (length, start) not in unsettled:
                unsettled[length, start] = await self.outage.call(
                    lambda length=length, start=start: self.store.fleet_unsettled(length, start),
                    "read the fleet's windows")
            if unsettled[length, start] and now < until:
                continue
            del self._deferred[event_id]
            if await self._handle(event_id, fields, False):
                done.append(event_id)
        return done

    async def _own_detector_configs(self, ids: list[str]) -> dict[str, DetectorConfig | Unreadable | None]:
        return {m: await self.store.own_detector_config(m, "detector") for m in ids}

    async def release(self, model_id: str, member: str) -> None:
        """Take a window the policy failed on off the model's pending set (so it does
        not hold back the model's later windows), keeping what its looks saw
        (:meth:`AlertPolicy.release <service.alerting.policy.AlertPolicy.release>`).

        Never raises: a failure here (Redis down, a member that does not parse) is logged
        with the model and window and counted in
        ``fleetwatch_detector_release_failures_total``; the window then stays pending.
        """
        try:
            start = parse_member(member)[1]
            await self.policy.release(model_id, start, member)
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

    async def evaluate(self, model_id: str, member: str,
                       wait_for_fleet: bool = False) -> list[Alert] | None:
        """Test one closed window and apply the alert policy; the alerts it created or
        changed. A window that cannot be tested is still released to the policy, so
        the model's later windows are not held back. None (nothing done) if
        ``wait_for_fleet`` and its volume test's control, the fleet's traffic, has not closed
        the window yet (:func:`~service.profiles.evaluation.evaluate_member`)."""
        t0 = time.perf_counter()
        model = await self._models.one(model_id)
        try:
            config = merge(service_config(self.settings), await self._detector_configs.one(model_id))
            outcome = await evaluate_member(self.store, self.settings, model_id, member, config,
                                            model.window_grid, wait_for_fleet)
        except REDIS_DOWN:
            raise
        except Exception:
            log.exception("window evaluation failed model=%s window=%s", model_id, member)
            outcome = "error"
        if outcome == UNSETTLED:
            return None
        results: list[TestResult] = []
        alerting: dict[str, frozenset[str]] = {}
        weights: dict[str, float] = {}
        looked: list[tuple[float, list[TestResult]]] = []
        length, start, version = parse_member(member)
        if isinstance(outcome, str):
            metrics.DETECTOR_SKIPPED.labels(reason=outcome).inc()
            log.info("window skipped model=%s window=%s reason=%s", model_id, member, outcome)
            await self.count(model_id, member, start, {f"skipped:{outcome}": 1})
        else:
            _current, baseline, config, results, pooled = outcome
            alerting = alerting_checks(baseline.profile, config)
            weights = config.fdr_weights
            plan = window_look_plan(baseline.profile, results, config.alpha)
            looked = [(lk.at, plan.tests(lk.counts, lk.records))
                      for lk in await self.store.window_looks(model_id, member)]
            await self.store.put_results(
                model_id, member,
                [{**asdict(r), "baseline": baseline.kind, "baseline_note": baseline.note,
                  "pool_note": pooled} for r in results],
                self.settings.retention_window_seconds, outcome[0].count)
        now = time.time()
        alerts = await self.policy.apply(WindowRef(model_id, member, start, length, version),
                                         results, alerting, model, await self.silences.active(now), now,
                                         weights, looked)
        if looked:
            await self.store.forget_window_looks(model_id, member)
        if not isinstance(outcome, str):  # after the policy: a policy error counts as skipped
            await self.count(model_id, member, start, {"evaluated": 1, "records": outcome[0].count},
                             last_window=member, last_window_start=start, last_baseline=outcome[1].kind,
                             last_evaluated_at=now)
        await self.rollups.advance(model_id, model.window_grid if model.window_timezone else length)
        if results:
            metrics.DETECTOR_RUNS.inc()
            metrics.DETECTOR_SECONDS.observe(time.perf_counter() - t0)
        return alerts
