"""A stored window tested: the detector configuration in force, its baseline, the checks.

What the detector role does to each closed window and what ``GET /v1/models/{id}/drift``
does to a window with no stored results, so both read it from here (an API module never
imports a worker role): the service defaults under the model's stored detector
configuration (:func:`model_detector_config`), the window's baseline as plan → fetch →
compute (:func:`resolve_baseline`: a pure plan from :mod:`detectors.baseline`, the reads
of the profile store, a pure choice and merge), and the catalog of checks on them
(:func:`evaluate_member`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from detectors.baseline import (
    DAY,
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
from detectors.quality.volume import VolumeHistory
from detectors.result import TestResult
from detectors.suite import evaluate_window
from detectors.volume_history import (
    FIRST_DAYS,
    FLEET_WINDOWS,
    fleet_history,
    plan_volume,
    seasonal_history,
    volume_history,
)
from detectors.volume_shape import DailyShape, ShapeFit
from service.profiles.rollups import GRANULARITIES
from service.profiles.store import Store
from service.settings import Settings
from service.stored import Unreadable
from sketches.profile import WindowProfile
from sketches.window import WindowGrid

BASELINE_CACHE_SECONDS = 3_600
#: :func:`evaluate_member`'s answer for a window whose volume test waits for the fleet.
UNSETTLED = "fleet_unsettled"


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
    volume_history: VolumeHistory
    current: WindowProfile
    pooled: int
    learned: LearnedFloors | None


def daily_fit(shape: DailyShape | None, grid: WindowGrid | None) -> ShapeFit | None:
    """The daily curve of the reference's event times when it was counted in the zone of the
    model's windows (None: no shape, no curve, or another zone)."""
    zone = getattr(grid.tz, "key", None) if grid is not None else None
    return shape.fit if shape is not None and shape.unusable(zone) is None else None


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
                           config: DetectorConfig, grid: WindowGrid | None = None,
                           wait_for_fleet: bool = False) -> Resolved | None:
    """Plan, fetch, compute: what the window's baseline needs (a pure plan), the reads
    (the reference, its learned floors and the cached merged baselines in one round
    trip; the past windows of what is not cached, two round trips per baseline), the
    choice and merge (pure). A window with fewer records than a test needs is pooled
    with the windows before it (its volume is still the window's own); the volume
    history is the seasonal slot's window counts (the trailing windows' for a window
    with no slot), and before any past week holds the slot, the same hour on past days
    of the same kind, or the trailing windows through the reference's daily shape, or
    the line through them (:func:`detectors.volume_history.volume_history`). ``grid``: the model's windows
    (:attr:`ModelConfig.window_grid`); on one in a time zone the seasonal slot is the
    same local hour or day of the same weekday, and for day windows the trailing span
    reaches the previous local day, whatever DST did to their lengths; rollups are
    looked up on the grid's rollup periods. Where the volume test's history is the fleet's
    records (:func:`_first_days_volume`) and the fleet has not closed the window yet: None
    if ``wait_for_fleet`` (the detector holds the window), else judged with the models that
    have."""
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
    volume = seasonal_history(counts, plan.seasonal_missing)
    if plan.trailing is not None and not (plan.trailing_if_needed and (reads.reference or seasonal)):
        trailing, trailing_counts = await past("trailing", (plan.trailing,))
        if plan.seasonal_missing is not None:
            volume = VolumeHistory("previous", tuple(trailing_counts),
                                   note=f"{len(trailing_counts)} trailing window(s): {plan.seasonal_missing}")
    if plan.seasonal_missing is None and sum(counts) == 0:
        found = await _first_days_volume(store, model_id, current, counts, grid, daily_fit(reads.shape, grid),
                                         wait_for_fleet)
        if found is None:
            return None
        volume = found
    pooled = 0
    if plan.pool is not None:
        preceding = await store.profiles_in(model_id, [plan.pool], (), grid)
        current, pooled = pool_window(current, preceding, settings.pool_min_records)
    baseline = choose_baseline(plan.kind, reads.reference, seasonal, trailing, plan.seasonal_missing)
    learned = reads.floors if baseline is not None and baseline.kind == "reference" else None
    if learned is not None and learned.window_seconds != current.window_seconds:
        learned = None  # learned for windows of another length
    return Resolved(baseline, volume, current, pooled, learned)


async def _first_days_volume(store: Store, model_id: str, current: WindowProfile, seasonal: list[int],
                             grid: WindowGrid | None, shape: ShapeFit | None,
                             wait_for_fleet: bool) -> VolumeHistory | None:
    """The volume history of a window with no past week at its slot
    (:func:`detectors.volume_history.volume_history`), with the fleet's records as its
    control before a past day of its kind exists; None if the fleet has not settled the
    window (:meth:`~service.profiles.traffic.TrafficStore.fleet_unsettled`) and
    ``wait_for_fleet``."""
    start, length = current.window_start, current.window_seconds
    vplan = plan_volume(start, length, grid)
    own = await store.counts_in(model_id, [*vplan.ranges, (start, start + 1)])
    volume = volume_history(vplan, start, length, seasonal, own, grid, shape)
    if length >= DAY or volume.source not in FIRST_DAYS:
        return volume
    unsettled = await store.fleet_unsettled(length, start)
    if unsettled and wait_for_fleet:
        return None
    traffic = await store.fleet_traffic(length, start, FLEET_WINDOWS)
    rates = traffic.without(model_id)
    if isinstance(rates, str):
        return replace(volume, note=f"{volume.note}; no fleet control: {rates}")
    return fleet_history(vplan, start, length, own, rates, volume, grid)


def pool_note(resolved: Resolved, settings: Settings) -> str | None:
    """Says in the result that the window was tested together with preceding ones."""
    if resolved.pooled == 0:
        return None
    return (f"tested together with the {resolved.pooled} preceding window(s): {resolved.current.count} "
            f"records (a test needs {settings.pool_min_records})")


async def evaluate_member(
    store: Store, settings: Settings, model_id: str, member: str, config: DetectorConfig | None = None,
    grid: WindowGrid | None = None, wait_for_fleet: bool = False,
) -> tuple[WindowProfile, Baseline, DetectorConfig, list[TestResult], str | None] | str:
    """Every configured test of one stored window, or the reason it cannot be tested
    (``"no_profile"``, ``"no_baseline"``; :data:`UNSETTLED` if its volume test waits for the
    fleet to close the window and ``wait_for_fleet``), under ``config`` (default: the
    model's :func:`model_detector_config`), its baselines found on ``grid`` (the model's
    windows, :func:`resolve_baseline`); with the note saying it was pooled, or None."""
    current = await store.window_profile(model_id, member)
    if current is None:
        return "no_profile"
    if config is None:
        config = await model_detector_config(store, settings, model_id)
    r = await resolve_baseline(store, settings, model_id, current, config, grid, wait_for_fleet)
    if r is None:
        return UNSETTLED
    if r.baseline is None:
        return "no_baseline"
    results = evaluate_window(r.current, r.baseline.profile, config, r.volume_history, r.learned,
                              records=current.count)
    return current, r.baseline, config, results, pool_note(r, settings)
