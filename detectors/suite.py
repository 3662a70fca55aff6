"""Run the tier-1 tests of one window profile against its baseline profile."""

from __future__ import annotations

from detectors.drift.categorical import chi2_test, js_test
from detectors.drift.ks import ks_test
from detectors.drift.psi import psi
from detectors.quality.null_rate import null_rate_test
from detectors.result import TestResult, insufficient
from sketches.profile import FeatureProfile, WindowProfile

SCORE_FEATURE = "__score__"


def _feature_tests(name: str, cur: FeatureProfile, ref: FeatureProfile, n_cur: int,
                   n_ref: int) -> list[TestResult]:
    results = [null_rate_test(ref.null_count, n_ref, cur.null_count, n_cur, name)]
    kind = ref.kind
    if kind == "numeric":
        results += [psi(ref.numeric, cur.numeric, name), ks_test(ref.numeric, cur.numeric, name)]
    elif kind == "categorical":
        results += [
            chi2_test(ref.categorical, cur.categorical, name),
            js_test(ref.categorical, cur.categorical, name),
        ]
    else:
        results.append(insufficient("drift", name, n_cur, n_ref, "baseline has no values"))
    return results


def evaluate_window(current: WindowProfile, baseline: WindowProfile) -> list[TestResult]:
    """All tier-1 tests of ``current`` against ``baseline``.

    Per feature of the baseline: null-rate change, then PSI and KS (numeric) or
    chi-square and Jensen-Shannon distance (categorical); the model score gets
    PSI and KS as feature ``"__score__"``. A feature absent from the current
    window is all-missing there. An empty current window yields one
    ``insufficient_data`` result and no drift.

    Returns
    -------
    list[TestResult]
    """
    if current.is_empty:
        return [insufficient("window", "", 0, baseline.count, "empty window")]
    results: list[TestResult] = []
    for name, ref in sorted(baseline.features.items()):
        cur = current.features.get(name)
        if cur is None:
            cur = FeatureProfile()
            cur.missing = current.count
        results += _feature_tests(name, cur, ref, current.count, baseline.count)
    if baseline.score.count:
        results += [
            psi(baseline.score, current.score, SCORE_FEATURE),
            ks_test(baseline.score, current.score, SCORE_FEATURE),
        ]
    return results
