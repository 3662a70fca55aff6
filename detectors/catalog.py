"""The tier-1 catalog: which check runs on which target, and the function behind each name.

Targets: ``numeric`` and ``categorical`` features (by the baseline's kind),
``vector`` features (embeddings, :mod:`sketches.vector`), the model ``score``,
the ``prediction`` (predicted label), the model's numeric features taken
together (``multivariate``: their co-moments, :mod:`detectors.multivariate`)
and the ``window`` itself. Every function returns a
:class:`~detectors.result.TestResult` and takes ``floor`` and ``alpha`` keywords.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from detectors.drift.cardinality import cardinality_test
from detectors.drift.chi2 import chi2_test
from detectors.drift.class_rate import class_rate_test
from detectors.drift.embedding.centroid import centroid_shift_test
from detectors.drift.embedding.mmd import mmd_test
from detectors.drift.embedding.norm import norm_shift_test
from detectors.drift.embedding.nulls import vector_null_rate_test
from detectors.drift.embedding.projections import projection_drift_test
from detectors.drift.js import js_test
from detectors.drift.ks import ks_test
from detectors.drift.mean_shift import mean_shift_test
from detectors.drift.psi import psi
from detectors.drift.unseen import new_category_test, vanished_category_test
from detectors.drift.variance_shift import variance_shift_test
from detectors.drift.wasserstein import wasserstein_test
from detectors.multivariate.correlation import correlation_test
from detectors.multivariate.reconstruction import reconstruction_error_test
from detectors.quality.nonfinite import nonfinite_test
from detectors.quality.null_rate import null_rate_test
from detectors.quality.out_of_range import out_of_range_test
from detectors.quality.type_mismatch import type_mismatch_test

TARGETS = ("numeric", "categorical", "vector", "score", "prediction", "multivariate", "window")

#: Checks on a pair of FeatureProfiles (data quality of any feature).
FEATURE_CHECKS: dict[str, Callable[..., Any]] = {
    "null_rate": null_rate_test,
    "type_mismatch": type_mismatch_test,
    "nonfinite": nonfinite_test,
}
#: Checks on a pair of NumericSketches (numeric features and the score).
NUMERIC_CHECKS: dict[str, Callable[..., Any]] = {
    "out_of_range": out_of_range_test,
    "psi": psi,
    "ks": ks_test,
    "js": js_test,
    "wasserstein": wasserstein_test,
    "mean_shift": mean_shift_test,
    "variance_shift": variance_shift_test,
}
#: Checks on a pair of CategoricalSketches (categorical features and predictions).
CATEGORICAL_CHECKS: dict[str, Callable[..., Any]] = {
    "chi2": chi2_test,
    "psi": psi,
    "js": js_test,
    "new_category": new_category_test,
    "vanished_category": vanished_category_test,
    "cardinality": cardinality_test,
    "class_rate": class_rate_test,
}
#: Checks on a pair of CoMoments (a model's numeric features taken together).
MULTIVARIATE_CHECKS: dict[str, Callable[..., Any]] = {
    "reconstruction_error": reconstruction_error_test,
    "correlation": correlation_test,
}
#: Checks on a pair of VectorProfiles (vector features).
VECTOR_CHECKS: dict[str, Callable[..., Any]] = {
    "null_rate": vector_null_rate_test,
    "centroid_shift": centroid_shift_test,
    "projection_drift": projection_drift_test,
    "mmd": mmd_test,
    "norm_shift": norm_shift_test,
}
#: Numeric checks that read the pair's shared CDF grid (built once per pair).
GRID_CHECKS = frozenset({"psi", "ks", "js", "wasserstein", "variance_shift"})

#: Check names per target, in the order they run.
CHECKS_BY_TARGET: dict[str, tuple[str, ...]] = {
    "numeric": ("null_rate", "type_mismatch", "nonfinite", "out_of_range", "psi", "ks", "js",
                "wasserstein", "mean_shift", "variance_shift"),
    "categorical": ("null_rate", "type_mismatch", "chi2", "psi", "js", "new_category",
                    "vanished_category", "cardinality"),
    "vector": ("null_rate", "centroid_shift", "projection_drift", "mmd", "norm_shift"),
    "score": ("psi", "ks", "js", "wasserstein", "mean_shift", "variance_shift"),
    "prediction": ("chi2", "psi", "js", "class_rate"),
    "multivariate": ("reconstruction_error", "correlation"),
    "window": ("volume",),
}
ALL_CHECKS = frozenset(c for checks in CHECKS_BY_TARGET.values() for c in checks)

#: Effect floors: the interval null each p-value tests, and the policy's floor.
#:
#: PSI 0.02 is the PSI of a mean moving by ~0.14 standard deviations: below any change
#: worth a page, so the configured floor only keeps the interval null honest; what a
#: feature normally moves from window to window is its learned floor, which every effect
#: must also clear. At the former 0.2 the interval null "PSI <= 0.2" left a shift of
#: PSI 0.25 on windows of ~150 values with p ~ 0.01-0.2, never a page (docs/detectors.md).
#: Variance shift 0.1: a spread ratio of e^0.1 ~ 1.1, the scale counterpart of a 0.2-sd
#: mean shift. Reconstruction error 0.1: the window's PCA error e^0.1 ~ 10 % above or below
#: the baseline's. Correlation 0.1: a change of Fisher's z by Cohen's "small" q (0.00 -> 0.10,
#: 0.50 -> 0.57, 0.80 -> 0.76). Volume 0.3: a count 30 % off its expectation is tolerated;
#: at the former 0.5 a 65 % drop on a window of ~200 records reached p ~ 10^-3 at best,
#: never a page, while the weekly rhythm is not compared across (detectors.volume_history)
#: and a line through the trailing hours misses a smooth daily wave by < 15 %.
DEFAULT_FLOORS: dict[str, float] = {
    "null_rate": 0.1, "type_mismatch": 0.01, "nonfinite": 0.01, "out_of_range": 0.01,
    "psi": 0.02, "ks": 0.1, "js": 0.1, "wasserstein": 0.1, "mean_shift": 0.2,
    "variance_shift": 0.1, "chi2": 0.1, "new_category": 0.01, "vanished_category": 0.05,
    "cardinality": 0.5, "class_rate": 0.05, "volume": 0.3,
    "reconstruction_error": 0.1, "correlation": 0.1,
    "centroid_shift": 0.1, "projection_drift": 0.005, "mmd": 0.0, "norm_shift": 0.2,
}
#: Checks that may page by default: one distribution check per target, the moment tests on
#: numeric features and the score (exact sums: the most powerful tests of a location or
#: scale shift on a small window), the share of categories the baseline never had (a
#: flood, a rename, an upstream re-encoding; tested against the baseline's Good-Turing
#: unseen mass), the correlation structure of the numeric features (a change in how they
#: move together that no marginal shows), data quality and volume. The reconstruction error
#: runs but does not page by default: its null law reads fourth moments of the features
#: only per feature, so on heavy-tailed features (Pareto, log-normal) it still alarmed in
#: 6.4 % of the simulator's clean hourly windows at alpha 0.01 (the correlation check in
#: 0.7 %; docs/detectors.md).
DEFAULT_ALERTING = ("numeric:psi", "numeric:mean_shift", "numeric:variance_shift",
                    "categorical:js", "categorical:new_category", "score:psi", "score:mean_shift",
                    "prediction:class_rate", "multivariate:correlation", "vector:centroid_shift",
                    "vector:projection_drift", "vector:norm_shift", "null_rate", "type_mismatch",
                    "nonfinite", "volume")
#: Prior weights of the checks in the FDR gate's weighted BH inside a window (absent: 1).
#: A data-quality break fires at p ~ 1e-50 when it fires at all, so at a tenth of the
#: mean weight it still clears the gate by dozens of orders of magnitude, and lends the
#: rest of its share to the drift tests, whose p-values on small windows sit near the
#: gate's level (about 1.9 x their level in a window of 27 data-quality and 26 drift
#: tests; docs/alerting.md "Weights inside a batch").
DEFAULT_FDR_WEIGHTS: dict[str, float] = {"null_rate": 0.1, "type_mismatch": 0.1, "nonfinite": 0.1}


def matches(entry: str, check: str, target: str) -> bool:
    """Does a config entry (``"psi"`` or ``"numeric:psi"``) name ``check`` on ``target``?

    Examples
    --------
    >>> matches("psi", "psi", "score"), matches("numeric:psi", "psi", "score")
    (True, False)
    """
    return entry == check or entry == f"{target}:{check}"


def valid_entry(entry: str) -> bool:
    """Is ``entry`` a check name, or ``target:check`` for a check that runs on that target?

    Examples
    --------
    >>> valid_entry("ks"), valid_entry("categorical:ks"), valid_entry("numeric:ks")
    (True, False, True)
    """
    target, _, check = entry.rpartition(":")
    if not target:
        return check in ALL_CHECKS
    return check in CHECKS_BY_TARGET.get(target, ())
