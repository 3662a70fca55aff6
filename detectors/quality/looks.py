"""Early looks: the data-quality rate tests on the records an open window gathered since
its previous look (docs/alerting.md, "Looks inside an open window").

A look sees counts only (:class:`~sketches.feature.QualityCounts` per feature, from the
aggregator), so it runs the tests that need nothing else: the null rate and the
non-finite rate. Each look tests a disjoint run of the window's records, so a break that
starts in the middle of a window is not diluted by the healthy records before it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from detectors.config import DetectorConfig, merge, plan, service_defaults
from detectors.policy.learned import LearnedFloors
from detectors.quality.nonfinite import nonfinite_of_counts
from detectors.quality.null_rate import null_rate_of_counts
from detectors.result import TestResult
from sketches.feature import QualityCounts
from sketches.profile import WindowProfile

#: The checks a look runs, by name: each on (baseline counts, look counts).
LOOK_CHECKS: dict[str, Callable[..., TestResult]] = {
    "null_rate": null_rate_of_counts,
    "nonfinite": nonfinite_of_counts,
}


@dataclass(frozen=True)
class LookPlan:
    """What the looks at one window test (:func:`look_plan`): the alpha, and per feature of
    the baseline its counts there and its look checks with their floors."""

    alpha: float
    features: tuple[tuple[str, QualityCounts, tuple[tuple[str, float], ...]], ...]

    def tests(self, counts: Mapping[str, QualityCounts], records: int) -> list[TestResult]:
        """The look checks on one look's counts.

        Parameters
        ----------
        counts : mapping of str to QualityCounts
            Per feature, its values among the look's records; a feature absent from it is
            missing in all of them.
        records : int
            Records the look covers (> 0).

        Returns
        -------
        list[TestResult]
            Per feature of the plan, in name order, its null-rate and (numeric) non-finite
            tests, each with the floor the window's own test has.

        Examples
        --------
        >>> from sdk.record import PredictionRecord
        >>> b = WindowProfile("m", 0, 0)
        >>> b.add_records([PredictionRecord("m", "1", str(i), 0.0, {"x": float(i)}) for i in range(500)])
        >>> rs = look_plan(b).tests({"x": QualityCounts(100, 95, 0)}, 100)
        >>> [(r.check, r.status.value, round(r.effect_size, 2)) for r in rs]
        [('null_rate', 'drift', 0.95), ('nonfinite', 'ok', 0.0)]
        >>> [r.effect_size for r in look_plan(b).tests({}, 100)][0]  # absent: all missing
        1.0
        """
        out = []
        for name, ref, checks in self.features:
            cur = counts.get(name, QualityCounts(records, records, 0))
            out += [LOOK_CHECKS[c](ref, cur, name, floor=floor, alpha=self.alpha) for c, floor in checks]
        return out


def look_plan(baseline: WindowProfile, config: DetectorConfig | None = None,
              learned: LearnedFloors | None = None) -> LookPlan:
    """The look checks (:data:`LOOK_CHECKS`) of every numeric or categorical feature of
    ``baseline`` (the window's baseline, as the window's own tests use it) under ``config``
    and ``learned`` (as for :func:`~detectors.suite.evaluate_window`: checks, floors with the
    learned ones, alpha). Small: a detector keeps one per open window for all its looks."""
    cfg = merge(service_defaults(), config)
    features = []
    for name, ref in sorted(baseline.features.items()):
        target = ref.kind
        if target not in ("numeric", "categorical"):
            continue
        p = plan(cfg, name, target, learned)
        checks = tuple((c, p.floors[c]) for c in p.checks if c in LOOK_CHECKS)
        if checks:
            features.append((name, ref.quality_counts(), checks))
    return LookPlan(cfg.alpha, tuple(features))


def window_look_plan(baseline: WindowProfile, results: Sequence[TestResult], alpha: float) -> LookPlan:
    """The looks' plan of a window already tested: its features' look checks with the floors
    its own tests ran with (``results``, learned floors included), so that its looks are
    judged, at its close, as its own tests were.

    Examples
    --------
    >>> from sdk.record import PredictionRecord
    >>> b = WindowProfile("m", 0, 0)
    >>> b.add_records([PredictionRecord("m", "1", str(i), 0.0, {"x": float(i)}) for i in range(500)])
    >>> from detectors.quality.null_rate import null_rate_test
    >>> r = null_rate_test(b.features["x"], b.features["x"], "x", floor=0.3)
    >>> window_look_plan(b, [r], 0.01).features[0][2]
    (('null_rate', 0.3),)
    """
    checks: dict[str, list[tuple[str, float]]] = {}
    for r in results:
        if r.check in LOOK_CHECKS and r.feature in baseline.features:
            checks.setdefault(r.feature, []).append((r.check, r.floor))
    return LookPlan(alpha, tuple((name, baseline.features[name].quality_counts(), tuple(c))
                                 for name, c in sorted(checks.items())))
