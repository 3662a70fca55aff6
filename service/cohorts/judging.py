"""Label cohorts judged: each cohort that matured tested against its baseline, the results
through the FDR gate and the alert policy.

Every ``performance_eval_interval_seconds`` the joiner hands each model here: a cohort
that has *matured* (labeled fraction reached, or its age in event time past the horizon)
is tested against the matured cohorts of the trailing baseline period, or the labelled
reference (binary: AUC drop, Hanley-McNeil, and log-loss increase, CLT; multiclass:
accuracy drop, two-proportion z; regression: MAE increase, CLT on |e|), and the results
go through the same FDR gate and alert policy as drift (feature ``__performance__``).
Each slice cohort is judged the same way against the same slice's trailing cohorts (the
ones judged ``drift`` left out: :func:`trailing_baseline`) once it is mature itself and
both it and its baseline pass the minimum sample rule. An immature cohort is never
tested, however alarming its partial metrics; one judged ``insufficient_data`` is judged
again when labels arrive.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from typing import Any

from detectors.performance.maturity import Maturity, maturity
from detectors.performance.report import estimated_metrics, realized_metrics
from detectors.performance.slices import for_slice, sample_shortfall
from detectors.performance.tasks import PERFORMANCE, PERFORMANCE_CHECKS, task_tests
from detectors.result import TestResult
from service import metrics
from service.alerting.models import Alert
from service.alerting.policy import AlertPolicy, WindowRef
from service.alerting.silences import SilenceStore
from service.cohorts import (
    Codec,
    CohortStore,
    LoadedCohort,
    codec_for,
    parse_slice_id,
    slice_label,
)
from service.profiles.keys import window_member
from service.registry import ModelConfig
from service.settings import Settings

log = logging.getLogger("fleetwatch.joiner")


def insufficient(evaluation: dict[str, Any]) -> bool:
    """Was a cohort's verdict, for any of its checks, ``insufficient_data`` (then more
    labels may still make it testable: the joiner judges it again when they come)?

    Examples
    --------
    >>> insufficient({"results": [{"status": "ok"}, {"status": "insufficient_data"}]})
    True
    >>> insufficient({"results": [{"status": "drift"}]})
    False
    """
    return any(r["status"] == "insufficient_data" for r in evaluation["results"])


def trailing_baseline(done: Mapping[int, dict[str, Any]], start: int, period: int) -> tuple[list[int], int]:
    """The judged cohorts that the cohort at ``start`` is compared with when the model has
    no labelled reference, and how many of the period's were left out.

    The cohorts judged in ``[start - period, start)``, less those judged ``drift`` on any
    check: a change's own cohorts are not the baseline of the cohorts after it, so a
    persistent drop keeps being measured against the performance before it (without this,
    the second cohort after a change is compared with a baseline holding the first, and a
    drop that read p ~ 1e-7 reads ~ 1e-3 one window later: it never breaches twice). When
    every cohort of the period was judged ``drift``, the change is the new normal and all
    of them are the baseline. Under no change a cohort is judged ``drift`` with probability
    alpha, so the left-out share is ~ alpha.

    Parameters
    ----------
    done : mapping of int to dict
        Window start (s) -> the stored evaluation of a judged cohort.
    start : int
        The judged cohort's window start (s).
    period : int
        The trailing baseline period (s).

    Returns
    -------
    (list of int, int)
        The baseline cohorts' window starts, and the number left out.

    Examples
    --------
    >>> ok, drift = {"results": [{"status": "ok"}]}, {"results": [{"status": "drift"}]}
    >>> trailing_baseline({0: ok, 3600: drift, 7200: ok}, 10_800, 86_400)
    ([0, 7200], 1)
    >>> trailing_baseline({0: drift, 3600: drift}, 7200, 86_400)
    ([0, 3600], 0)
    """
    period_starts = sorted(b for b in done if start - period <= b < start)
    kept = [b for b in period_starts
            if not any(r["status"] == "drift" for r in done[b]["results"])]
    return (kept, len(period_starts) - len(kept)) if kept else (period_starts, 0)


def performance_tests(baseline: Any, current: Any, cfg: ModelConfig, alpha: float) -> list[TestResult]:
    """The model task's checks of a current cohort against its baseline
    (:func:`detectors.performance.tasks.task_tests` with the model's performance floors)."""
    perf = cfg.performance
    return task_tests(perf.task, baseline, current, alpha=alpha, auc_floor=perf.auc_floor,
                      log_loss_floor=perf.log_loss_floor, accuracy_floor=perf.accuracy_floor,
                      mae_floor=perf.mae_floor, mae_relative_floor=perf.mae_relative_floor)


class CohortJudge:
    """Tests a model's matured cohorts (the joiner's evaluation step).

    Parameters
    ----------
    settings : Settings
        ``alpha``, ``retention_hourly_seconds``.
    cohorts : CohortStore
    policy : AlertPolicy
    silences : SilenceStore
    """

    def __init__(self, settings: Settings, cohorts: CohortStore, policy: AlertPolicy,
                 silences: SilenceStore) -> None:
        self.settings = settings
        self.cohorts = cohorts
        self.policy = policy
        self.silences = silences

    async def _baseline(self, model_id: str, codec: Codec, starts: list[int], sid: str | None = None
                        ) -> LoadedCohort:
        baseline = codec.empty()
        async for _start, c in self.cohorts.iter_load(model_id, starts, codec, sid):
            baseline.merge(c)
        return baseline

    async def evaluate_model(self, model_id: str, cfg: ModelConfig, watermark: float) -> list[Alert]:
        """Test every cohort (whole model, then slices) that matured since the last
        call, and again every cohort judged ``insufficient_data`` that has gained labels
        since, by the model's ``watermark`` (its latest prediction event time read); the
        alerts changed."""
        perf = cfg.performance
        codec = codec_for(perf.task, perf.threshold)
        done = await self.cohorts.evaluations(model_id)
        starts = await self.cohorts.cohort_starts(model_id, 0, math.inf)
        changed = []
        reference = (await self.cohorts.reference_cohort(model_id, codec)
                     if perf.baseline == "auto" else None)
        todo = [s for s in starts if s not in done or insufficient(done[s])]
        for start, (n_pred, n_labeled) in zip(
                todo, await self.cohorts.sizes(model_id, [(s, None) for s in todo]), strict=True):
            if start in done and n_labeled <= done[start]["labeled"]:
                continue  # judged insufficient, and no label has arrived since
            if n_pred and not self._maturity(n_labeled, n_pred, start, watermark, cfg).mature:
                continue  # cheap: the counts only (a cohort without them is read in full)
            cohort = await self.cohorts.load(model_id, start, codec)
            m = self._maturity(cohort.labeled, cohort.predictions, start, watermark, cfg)
            if not m.mature:
                continue
            # The labelled reference when there is one: fixed before any live label, so the
            # baseline cannot drift into the data after a change.
            trailing, left_out = trailing_baseline(done, start, perf.baseline_seconds)
            baseline = reference if reference is not None else await self._baseline(
                model_id, codec, trailing)
            if start in done:
                metrics.COHORTS_REJUDGED.inc()
                log.info("cohort re-judged model=%s window=%s labeled=%d (was %d: insufficient data)",
                         model_id, start, cohort.labeled, done[start]["labeled"])
            results = performance_tests(baseline.metrics, cohort.metrics, cfg, self.settings.alpha)
            changed += await self._apply(model_id, cfg, start, "labels", results, force=True)
            evaluation = self._evaluation(perf.task, cohort, baseline, m, results)
            evaluation["baseline"] = "trailing" if reference is None else "reference"
            if reference is None:
                evaluation["baseline_left_out"] = left_out
            await self.cohorts.put_evaluation(model_id, start, evaluation)
            done[start] = evaluation
            metrics.COHORTS_EVALUATED.inc()
        return changed + await self.evaluate_slices(model_id, cfg, codec, starts, watermark)

    async def evaluate_slices(self, model_id: str, cfg: ModelConfig, codec: Codec, starts: list[int],
                              watermark: float) -> list[Alert]:
        """Test every slice cohort that matured since the last call, each against the
        same slice's judged cohorts of the baseline period; the alerts changed."""
        perf = cfg.performance
        pending = await self.cohorts.windows_pending_slices(model_id)
        if not pending:
            return []
        # The pending windows and the baselines they may need.
        near = [s for s in starts if min(pending) - perf.baseline_seconds <= s <= max(pending)]
        present = await self.cohorts.window_slices(model_id, pending)
        judged = await self.cohorts.judged_slices(model_id, near)
        todo = [(s, sid) for s in pending for sid in sorted(present[s] - judged.get(s, {}).keys())]
        changed = []
        for (start, sid), (n_pred, n_labeled) in zip(todo, await self.cohorts.sizes(model_id, todo),
                                                    strict=True):
            m = self._maturity(n_labeled, n_pred, start, watermark, cfg)
            if not m.mature:
                continue
            cohort = await self.cohorts.load(model_id, start, codec, sid)
            trailing, left_out = trailing_baseline(
                {b: judged[b][sid] for b in near if sid in judged.get(b, {})}, start, perf.baseline_seconds)
            baseline = await self._baseline(model_id, codec, trailing, sid)
            key, value = parse_slice_id(sid)
            label = slice_label(key, value)
            shortfall = sample_shortfall(baseline.metrics, cohort.metrics, perf.slice_min_labeled,
                                         perf.slice_min_per_class if perf.task == "binary" else 0)
            results = for_slice(performance_tests(baseline.metrics, cohort.metrics, cfg, self.settings.alpha),
                                label, shortfall)
            changed += await self._apply(model_id, cfg, start, f"labels@{label}", results)
            evaluation = self._evaluation(perf.task, cohort, baseline, m, results)
            evaluation["slice"] = {"key": key, "value": value}
            evaluation["baseline_left_out"] = left_out
            await self.cohorts.put_slice_evaluation(model_id, start, sid, evaluation,
                                                    self.settings.retention_hourly_seconds)
            judged.setdefault(start, {})[sid] = evaluation
            metrics.COHORTS_EVALUATED.inc()
        for start in pending:
            await self.cohorts.settle_slices(model_id, start)
        return changed

    def _maturity(self, labeled: int, predictions: int, start: int, watermark: float,
                  cfg: ModelConfig) -> Maturity:
        perf = cfg.performance
        return maturity(labeled, predictions, watermark - (start + cfg.window_grid.window_at(start)[1]),
                        perf.expected_label_fraction, perf.label_horizon_seconds)

    async def _apply(self, model_id: str, cfg: ModelConfig, start: int, version: str,
                     results: list[TestResult], force: bool = False) -> list[Alert]:
        """The window's results through the FDR gate and the alert policy (a slice whose
        checks could not run is skipped: it has nothing to gate or record)."""
        if not force and not any(r.p_value is not None for r in results):
            return []
        now = time.time()
        length = cfg.window_grid.window_at(start)[1]  # a local day may be 23 or 25 hours
        alerting = {PERFORMANCE: PERFORMANCE_CHECKS | {r.check for r in results}}
        return await self.policy.apply(
            WindowRef(model_id, window_member(length, start, version), start, length, version),
            results, alerting, cfg, await self.silences.active(now), now)

    @staticmethod
    def _evaluation(task: str, cohort: LoadedCohort, baseline: LoadedCohort, m: Maturity,
                    results: list[TestResult]) -> dict[str, Any]:
        realized = realized_metrics(task, cohort.metrics)
        estimated = estimated_metrics(task, cohort.metrics, cohort.confidence_sum, cohort.confidence_n)
        compared = [k for k in ("accuracy", "roc_auc") if k in estimated]
        return {
            "maturity": {"labeled_fraction": m.labeled_fraction, "reason": m.reason},
            "labeled": cohort.labeled, "predictions": cohort.predictions,
            "realized": realized,
            "estimated": {k: estimated[k] for k in compared},
            "estimate_error": {k: None if realized.get(k) is None or estimated[k] is None
                               else estimated[k] - realized[k] for k in compared},
            "baseline_labeled": baseline.labeled,
            "results": [{"check": r.check, "status": r.status.value, "effect_size": r.effect_size,
                         "p_value": r.p_value, "floor": r.floor, "reason": r.reason}
                        for r in results],
        }
