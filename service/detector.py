"""The detector worker: evaluates each closed window against the model's baseline.

Consumes window-closed events from a Redis stream consumer group (so replicas
share the work and a crashed replica's events are reclaimed), runs the tier-1
tests, applies the alert policy and stores alerts. Alert ids are a hash of
(model, version, window, feature, check), so re-processing an event never
duplicates an alert.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import time
from dataclasses import asdict
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from detectors.policy import AlertCandidate, EffectFloorPolicy, Rule
from detectors.suite import evaluate_window
from service import metrics
from service.settings import Settings
from service.store import Store, parse_member
from sketches.profile import WindowProfile

log = logging.getLogger("fleetwatch.detector")

EVENTS_PER_READ = 50
RECLAIM_IDLE_MS = 60_000


def policy_from_settings(s: Settings) -> EffectFloorPolicy:
    """The alert policy configured by ``FLEETWATCH_*_FLOOR`` and ``FLEETWATCH_ALPHA``."""
    return EffectFloorPolicy(
        rules=(
            Rule("psi", s.psi_floor, "ks"),
            Rule("js", s.js_floor, "chi2"),
            Rule("null_rate", s.null_rate_floor, "null_rate"),
        ),
        alpha=s.alpha,
    )


def alert_id(model_id: str, member: str, feature: str, check: str) -> str:
    """Deterministic alert id: the same window, feature and check give the same id."""
    return hashlib.sha256(f"{model_id}\0{member}\0{feature}\0{check}".encode()).hexdigest()[:20]


def make_alert(current: WindowProfile, member: str, c: AlertCandidate, now: float) -> dict[str, Any]:
    """The stored (and served) form of an alert."""
    _length, _start, version = parse_member(member)
    return {
        "id": alert_id(current.model_id, member, c.feature, c.check),
        "model_id": current.model_id,
        "model_version": version,
        "feature": c.feature,
        "check": c.check,
        "state": "firing",
        "window_start": current.window_start,
        "window_end": current.window_end,
        "statistic": c.effect.statistic,
        "effect_size": c.effect.effect_size,
        "p_value": c.p_value,
        "significance_check": c.significance.check,
        "n_current": c.effect.n_current,
        "n_baseline": c.effect.n_baseline,
        "created_at": now,
    }


class Detector:
    """One detector replica."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.policy = policy_from_settings(settings)
        self.consumer = f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"

    async def run(self, stop: asyncio.Event) -> None:
        """Evaluate windows until ``stop`` is set."""
        group = self.settings.detector_group
        await self.store.ensure_event_group(group)
        while not stop.is_set():
            try:
                events = await self.store.read_events(
                    group, self.consumer, EVENTS_PER_READ, 500, RECLAIM_IDLE_MS
                )
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                metrics.REDIS_ERRORS.inc()
                log.warning("redis unavailable: %s", exc)
                await asyncio.sleep(1.0)
                continue
            done = []
            for event_id, fields in events:
                try:
                    await self.evaluate(fields["model"], fields["member"])
                except (RedisConnectionError, RedisTimeoutError, OSError):
                    metrics.REDIS_ERRORS.inc()
                    break  # not acknowledged: re-read once Redis is back
                except Exception:
                    metrics.DETECTOR_SKIPPED.labels(reason="error").inc()
                    log.exception("window evaluation failed model=%s window=%s",
                                  fields.get("model"), fields.get("member"))
                done.append(event_id)
            await self.store.ack_events(group, done)

    async def evaluate(self, model_id: str, member: str) -> list[dict[str, Any]]:
        """Test one closed window; store and return the alerts it raised."""
        t0 = time.perf_counter()
        current = await self.store.window_profile(model_id, member)
        baseline = await self.store.reference(model_id)
        if current is None or baseline is None:
            reason = "no_profile" if current is None else "no_baseline"
            metrics.DETECTOR_SKIPPED.labels(reason=reason).inc()
            log.info("window skipped model=%s window=%s reason=%s", model_id, member, reason)
            return []
        results = evaluate_window(current, baseline)
        candidates = self.policy.decide(results)
        now = time.time()
        alerts = [make_alert(current, member, c, now) for c in candidates]
        for a in alerts:
            if await self.store.put_alert(a):
                metrics.ALERTS_RAISED.labels(check=a["check"]).inc()
                log.info("alert model=%s window=%s feature=%s check=%s effect=%.3f p=%.2e",
                            model_id, member, a["feature"], a["check"], a["effect_size"], a["p_value"])
        await self.store.put_results(model_id, member, [asdict(r) for r in results])
        metrics.DETECTOR_RUNS.inc()
        metrics.DETECTOR_SECONDS.observe(time.perf_counter() - t0)
        return alerts
