"""Run the tier-1 catalog on one window profile against its baseline profile."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from detectors.catalog import (
    CATEGORICAL_CHECKS,
    FEATURE_CHECKS,
    GRID_CHECKS,
    MULTIVARIATE_CHECKS,
    NUMERIC_CHECKS,
    VECTOR_CHECKS,
)
from detectors.config import DetectorConfig, TestPlan, merge, plan, service_defaults
from detectors.drift.binned import aligned_bins
from detectors.drift.divergence import MIN_COUNT
from detectors.drift.grid import JointCdf, joint_cdf
from detectors.multivariate import MULTIVARIATE_FEATURE
from detectors.policy.learned import AppliedFloor, LearnedFloors
from detectors.quality.volume import VolumeHistory, volume_test
from detectors.result import Status, TestResult, failed, insufficient
from sketches.categorical import CategoricalSketch
from sketches.comoments import CoMoments
from sketches.numeric import NumericSketch
from sketches.profile import FeatureProfile, WindowProfile
from sketches.vector import VectorProfile

SCORE_FEATURE = "__score__"
PREDICTION_FEATURE = "__prediction__"
WINDOW_FEATURE = ""
BIN_CHECKS = frozenset({"psi", "js", "ks", "wasserstein"})
"""Grid checks that read exact reference bins instead of the grid when both sides have them."""
#: Statuses of results whose test did not run.
NOT_RUN = (Status.INSUFFICIENT_DATA, Status.ERROR)


def _guarded(fn: Callable[..., TestResult], check: str, feature: str, n_cur: int, n_ref: int,
             *args: Any, applied: AppliedFloor | None = None, **kwargs: Any) -> TestResult:
    """Run one check; an exception becomes an ``error`` result naming it (never a crash).
    A result that did not run (``insufficient_data``, ``error``) reports the floor the
    check was configured with, not the point null's 0; with ``applied`` (learned floors
    were consulted) the result says which floor it ran with and why."""
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - one bad check must not hide the others
        result = failed(check, feature, n_cur, n_ref, f"{type(exc).__name__}: {exc}")
    floor = kwargs.get("floor")
    if floor is not None and result.status in NOT_RUN and result.floor != floor:
        result = replace(result, floor=floor)
    if applied is not None:
        result = replace(result, floor_source=applied.source, floor_reason=applied.reason)
    return result


def _numeric(name: str, ref: NumericSketch, cur: NumericSketch, p: TestPlan,
             alpha: float) -> list[TestResult]:
    grid: JointCdf | None = None
    binned = not (ref.is_exact and cur.is_exact) and aligned_bins(ref, cur) is not None
    out = []
    for check in p.checks:
        fn = NUMERIC_CHECKS.get(check)
        if fn is None:
            continue
        kwargs: dict[str, Any] = {"floor": p.floors[check], "alpha": alpha,
                                  "applied": p.applied.get(check)}
        if binned and check in BIN_CHECKS:
            pass  # read the exact bin counts, no grid
        elif check in GRID_CHECKS and min(ref.count, cur.count) >= MIN_COUNT:
            if grid is None:
                grid = joint_cdf(ref, cur)
            kwargs["grid"] = grid
        out.append(_guarded(fn, check, name, cur.count, ref.count, ref, cur, name, **kwargs))
    return out


def _categorical(name: str, ref: CategoricalSketch, cur: CategoricalSketch, p: TestPlan,
                 alpha: float) -> list[TestResult]:
    return [
        _guarded(CATEGORICAL_CHECKS[c], c, name, cur.count, ref.count, ref, cur, name,
                 floor=p.floors[c], alpha=alpha, applied=p.applied.get(c))
        for c in p.checks if c in CATEGORICAL_CHECKS
    ]


def _multivariate(ref: CoMoments, cur: CoMoments | None, p: TestPlan,
                  alpha: float) -> list[TestResult]:
    name = MULTIVARIATE_FEATURE
    if cur is None:  # a window profile of format 3 kept no co-moments
        return [insufficient(c, name, 0, ref.n, "the window kept no co-moments (profile format 3)")
                for c in p.checks if c in MULTIVARIATE_CHECKS]
    return [
        _guarded(MULTIVARIATE_CHECKS[c], c, name, cur.n, ref.n, ref, cur, name,
                 floor=p.floors[c], alpha=alpha, applied=p.applied.get(c))
        for c in p.checks if c in MULTIVARIATE_CHECKS
    ]


def _vector(name: str, ref: VectorProfile, cur: VectorProfile | None, missing: int, p: TestPlan,
            alpha: float) -> list[TestResult]:
    """The vector checks; a window without the feature's vectors has all its records missing
    (its null rate is tested, its distribution checks lack data); one with vectors of another
    dimension or projection is insufficient data for each check."""
    if cur is None:
        cur = VectorProfile(ref.dim, ref.k, ref.seed)
        cur.add_nulls(missing)
    if not ref.compatible(cur):
        why = f"the window's vectors have dimension {cur.dim}, the baseline's {ref.dim}"
        return [insufficient(c, name, cur.count, ref.count, why) for c in p.checks if c in VECTOR_CHECKS]
    return [
        _guarded(VECTOR_CHECKS[c], c, name, cur.count, ref.count, ref, cur, name,
                 floor=p.floors[c], alpha=alpha, applied=p.applied.get(c))
        for c in p.checks if c in VECTOR_CHECKS
    ]


def _feature(name: str, ref: FeatureProfile, cur: FeatureProfile, config: DetectorConfig,
             alpha: float, learned: LearnedFloors | None) -> list[TestResult]:
    target = ref.kind
    if target == "empty":
        return [insufficient("drift", name, cur.total, ref.total, "baseline has no values")]
    p = plan(config, name, target, learned)
    out = [
        _guarded(FEATURE_CHECKS[c], c, name, cur.total, ref.total, ref, cur, name,
                 floor=p.floors[c], alpha=alpha, applied=p.applied.get(c))
        for c in p.checks if c in FEATURE_CHECKS
    ]
    if target == "numeric":
        return out + _numeric(name, ref.numeric, cur.numeric, p, alpha)
    return out + _categorical(name, ref.categorical, cur.categorical, p, alpha)


def _targets(baseline: WindowProfile) -> list[tuple[str, str]]:
    """(feature, target) pairs a baseline supports."""
    out = [(name, f.kind) for name, f in sorted(baseline.features.items()) if f.kind != "empty"]
    out += [(name, "vector") for name, v in sorted(baseline.vectors.items())
            if v.count and name not in baseline.features]
    if baseline.score.count:
        out.append((SCORE_FEATURE, "score"))
    if baseline.prediction.count:
        out.append((PREDICTION_FEATURE, "prediction"))
    if baseline.comoments is not None and baseline.comoments.dim >= 2:
        out.append((MULTIVARIATE_FEATURE, "multivariate"))
    return [*out, (WINDOW_FEATURE, "window")]


def alerting_checks(baseline: WindowProfile,
                    config: DetectorConfig | None = None) -> dict[str, frozenset[str]]:
    """Per feature, the checks that may alert (the alert policy's input).

    Examples
    --------
    >>> from sdk.record import PredictionRecord
    >>> b = WindowProfile("m", 0, 0)
    >>> b.add_records([PredictionRecord("m", "1", "a", 0.0, {"x": 1.0, "c": "u"}, score=0.3)])
    >>> a = alerting_checks(b)
    >>> sorted(a["x"])
    ['mean_shift', 'nonfinite', 'null_rate', 'psi', 'type_mismatch', 'variance_shift']
    >>> sorted(a["c"])
    ['js', 'new_category', 'null_rate', 'type_mismatch']
    >>> sorted(a["__score__"]), sorted(a[""]), "__multivariate__" in a  # one numeric feature
    (['mean_shift', 'psi'], ['volume'], False)
    """
    cfg = merge(service_defaults(), config)
    return {name: plan(cfg, name, target).alerting for name, target in _targets(baseline)}


def evaluate_window(
    current: WindowProfile,
    baseline: WindowProfile,
    config: DetectorConfig | None = None,
    volume_history: Sequence[int] | VolumeHistory | None = None,
    learned: LearnedFloors | None = None,
    records: int | None = None,
) -> list[TestResult]:
    """All configured tier-1 tests of ``current`` against ``baseline``.

    Parameters
    ----------
    current, baseline : WindowProfile
    config : DetectorConfig, optional
        Overrides of :func:`~detectors.config.service_defaults` (checks,
        floors, alpha; per feature).
    volume_history : sequence of int or VolumeHistory, optional
        Record counts of comparable past windows for the volume test (the
        same slot of past weeks), or the history chosen by
        :func:`detectors.volume_history.volume_history`; None: volume is
        ``insufficient_data``.
    learned : LearnedFloors, optional
        What each feature normally moves window to window
        (:mod:`detectors.policy.learned`): each test's floor is then
        ``max(configured, learned)`` and its result says which (``floor_source``,
        ``floor_reason``). The caller passes it only when it fits the
        comparison (learned against this baseline, for windows of this length).
    records : int, optional
        The record count the volume test judges (default ``current.count``; a
        window pooled with its predecessors passes its own count).

    Returns
    -------
    list[TestResult]
        Per feature of the baseline (by its kind): data quality, then
        distribution checks; the score (``"__score__"``, numeric checks) and
        the predicted label (``"__prediction__"``, categorical checks and the
        class-rate check) when the baseline has them; the multivariate checks
        (``"__multivariate__"``) when the baseline's co-moments hold >= 2 numeric
        features (:mod:`detectors.multivariate`); the window-level volume
        test (feature ``""``). A feature absent from the current window is
        all-missing there. An empty current window gives an
        ``empty_window`` result (insufficient data) and the volume test only.
        A check that raises gives an ``error`` result, never an exception.

    Examples
    --------
    >>> from sdk.record import PredictionRecord
    >>> rows = lambda v: [PredictionRecord("m", "1", str(i), 0.0, {"x": float(i % 50 + v)})
    ...                   for i in range(500)]
    >>> b, c = WindowProfile("m", 0, 0), WindowProfile("m", 0, 300)
    >>> b.add_records(rows(0)); c.add_records(rows(40))
    >>> {r.check: r.status.value for r in evaluate_window(c, b) if r.feature == "x"}["psi"]
    'drift'
    """
    cfg = merge(service_defaults(), config)
    alpha = cfg.alpha
    window_plan = plan(cfg, WINDOW_FEATURE, "window")
    results: list[TestResult] = []
    if current.is_empty:
        results.append(insufficient("empty_window", WINDOW_FEATURE, 0, baseline.count, "empty window"))
    else:
        for name, target in _targets(baseline):
            if target in ("numeric", "categorical"):
                cur = current.features.get(name)
                if cur is None:
                    cur = FeatureProfile()
                    cur.missing = current.count
                results += _feature(name, baseline.features[name], cur, cfg, alpha, learned)
            elif target == "vector":
                results += _vector(name, baseline.vectors[name], current.vectors.get(name), current.count,
                                   plan(cfg, name, target, learned), alpha)
            elif target == "score":
                results += _numeric(name, baseline.score, current.score,
                                    plan(cfg, name, target, learned), alpha)
            elif target == "prediction":
                results += _categorical(name, baseline.prediction, current.prediction,
                                        plan(cfg, name, target, learned), alpha)
            elif target == "multivariate" and baseline.comoments is not None:
                results += _multivariate(baseline.comoments, current.comoments,
                                         plan(cfg, name, target, learned), alpha)
    if "volume" in window_plan.checks:
        results.append(volume_test(current.count if records is None else records,
                                   volume_history, WINDOW_FEATURE,
                                   floor=window_plan.floors["volume"], alpha=alpha))
    return results
