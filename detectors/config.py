"""Detector configuration: which checks run and may alert, their floors, alpha, baseline and
FDR weights.

A model's :class:`DetectorConfig` overrides the service defaults field by
field; its ``features`` map overrides the model's checks, alerting checks and
floors for single features (the score is ``"__score__"``, the predicted label
``"__prediction__"``, the numeric features taken together ``"__multivariate__"``,
window-level checks ``""``). Pure data (pydantic), served
and validated as JSON by the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field, field_validator

from detectors.catalog import (
    CHECKS_BY_TARGET,
    DEFAULT_ALERTING,
    DEFAULT_FDR_WEIGHTS,
    DEFAULT_FLOORS,
    matches,
    valid_entry,
)
from detectors.policy.learned import AppliedFloor, LearnedFloors, applied_floor
from detectors.strict import StrictModel

BaselineKind = Literal["auto", "reference", "trailing", "seasonal"]
MAX_FDR_WEIGHT = 100.0


def _check_entries(entries: list[str] | None) -> list[str] | None:
    bad = [e for e in entries or () if not valid_entry(e)]
    if bad:
        raise ValueError(f"unknown checks {bad}; known: {sorted(DEFAULT_FLOORS)} "
                         f"optionally as target:check with target in {sorted(CHECKS_BY_TARGET)}")
    return entries


def _check_floors(floors: dict[str, float]) -> dict[str, float]:
    bad = [k for k in floors if k not in DEFAULT_FLOORS]
    if bad:
        raise ValueError(f"floors for unknown checks {bad}")
    if any(v < 0 for v in floors.values()):
        raise ValueError("floors must be >= 0")
    return floors


def _check_weights(weights: dict[str, float]) -> dict[str, float]:
    bad = [k for k in weights if k not in DEFAULT_FLOORS]
    if bad:
        raise ValueError(f"FDR weights for unknown checks {bad}")
    if any(not 0.0 < v <= MAX_FDR_WEIGHT for v in weights.values()):
        raise ValueError(f"FDR weights must be in (0, {MAX_FDR_WEIGHT:g}]")
    return weights


class BaselineConfig(StrictModel):
    """What a window is compared with.

    ``auto`` (the default): the reference profile when the model has one,
    else the seasonal baseline when past weeks have windows in the same slot,
    else the trailing baseline.
    """

    kind: BaselineKind = Field("auto", description="auto | reference | trailing | seasonal")
    trailing_seconds: int = Field(86_400, ge=3_600, le=31 * 86_400,
                                  description="Trailing baseline: history merged, seconds")
    seasonal_weeks: int = Field(4, ge=1, le=52,
                                description="Seasonal baseline (and volume): past weeks merged")


class CheckOverrides(StrictModel):
    """Checks, alerting checks and floors; None / absent keys inherit."""

    checks: list[str] | None = Field(
        None, description="Checks to run (names, or target:name); None: every check of the target")
    alerting: list[str] | None = Field(
        None, description="Checks that may alert (names, or target:name such as numeric:psi)")
    floors: dict[str, float] = Field(default_factory=dict, description="Effect floor per check")

    _entries = field_validator("checks", "alerting")(_check_entries)
    _floors = field_validator("floors")(_check_floors)


class DetectorConfig(CheckOverrides):
    """A model's detector configuration (fields left unset inherit the service defaults)."""

    alpha: float | None = Field(None, gt=0, lt=1, description="Significance level of every test")
    baseline: BaselineConfig = Field(default_factory=BaselineConfig)
    features: dict[str, CheckOverrides] = Field(default_factory=dict,
                                                description="Per-feature overrides")
    fdr_weights: dict[str, float] = Field(
        default_factory=dict,
        description="Prior weight per check in the FDR gate's weighted BH (absent: 1); a "
                    "window's weights are rescaled to mean 1, so they move its level between "
                    "checks without raising it")

    _weights = field_validator("fdr_weights")(_check_weights)


@dataclass(frozen=True)
class TestPlan:
    """The resolved checks of one target: what runs, what may alert, each floor (the
    configured one, or the learned one where larger: ``applied`` says which and why)."""

    __test__ = False

    checks: tuple[str, ...]
    alerting: frozenset[str]
    floors: dict[str, float]
    applied: dict[str, AppliedFloor] = field(default_factory=dict)


def service_defaults(alpha: float = 0.01, floors: dict[str, float] | None = None) -> DetectorConfig:
    """The defaults every model inherits: all checks, :data:`DEFAULT_ALERTING`, floors,
    :data:`DEFAULT_FDR_WEIGHTS`.

    Examples
    --------
    >>> service_defaults(floors={"psi": 0.25}).floors["psi"]
    0.25
    >>> service_defaults().fdr_weights["null_rate"]
    0.1
    """
    return DetectorConfig(alpha=alpha, alerting=list(DEFAULT_ALERTING),
                          floors={**DEFAULT_FLOORS, **(floors or {})},
                          fdr_weights=dict(DEFAULT_FDR_WEIGHTS))


def merge(base: DetectorConfig, override: DetectorConfig | None) -> DetectorConfig:
    """``override`` on top of ``base``: set fields replace, floors and features merge by key.

    Examples
    --------
    >>> m = merge(service_defaults(), DetectorConfig(floors={"ks": 0.3}, alpha=0.001))
    >>> m.alpha, m.floors["ks"], m.floors["psi"]
    (0.001, 0.3, 0.02)
    >>> merge(m, DetectorConfig(fdr_weights={"null_rate": 0.2})).fdr_weights["null_rate"]
    0.2
    """
    if override is None:
        return base
    features = dict(base.features)
    for name, o in override.features.items():
        old = features.get(name, CheckOverrides())
        features[name] = CheckOverrides(
            checks=o.checks if o.checks is not None else old.checks,
            alerting=o.alerting if o.alerting is not None else old.alerting,
            floors={**old.floors, **o.floors},
        )
    given = override.model_fields_set
    return DetectorConfig(
        alpha=override.alpha if override.alpha is not None else base.alpha,
        checks=override.checks if override.checks is not None else base.checks,
        alerting=override.alerting if override.alerting is not None else base.alerting,
        floors={**base.floors, **override.floors},
        baseline=override.baseline if "baseline" in given else base.baseline,
        features=features,
        fdr_weights={**base.fdr_weights, **override.fdr_weights},
    )


def plan(config: DetectorConfig, feature: str, target: str,
         learned: LearnedFloors | None = None) -> TestPlan:
    """The checks of ``feature`` (on ``target``) after the per-feature overrides; with
    ``learned``, each floor is ``max(configured, learned)`` (``applied`` says which).

    Examples
    --------
    >>> cfg = merge(service_defaults(), DetectorConfig(features={"x": {"checks": ["ks"]}}))
    >>> plan(cfg, "x", "numeric").checks, sorted(plan(cfg, "y", "numeric").alerting)
    (('ks',), ['mean_shift', 'nonfinite', 'null_rate', 'psi', 'type_mismatch', 'variance_shift'])
    >>> from detectors.policy.learned import LearnedFloor
    >>> lf = LearnedFloors("reference", 3600, 0.95, 24, {"y": {"psi": LearnedFloor(0.3, 0.4, 0.1, 24)}})
    >>> p = plan(cfg, "y", "numeric", lf)
    >>> p.floors["psi"], p.applied["psi"].source, p.floors["ks"], p.applied["ks"].source
    (0.3, 'learned', 0.1, 'configured')
    """
    o = config.features.get(feature, CheckOverrides())
    enabled = o.checks if o.checks is not None else config.checks
    alerting = o.alerting if o.alerting is not None else config.alerting or []
    available = CHECKS_BY_TARGET[target]
    checks = available if enabled is None else tuple(
        c for c in available if any(matches(e, c, target) for e in enabled))
    floors = {**DEFAULT_FLOORS, **config.floors, **o.floors}
    applied = {} if learned is None else {
        c: applied_floor(c, floors[c], learned.get(feature, c), learned) for c in checks}
    return TestPlan(
        checks=checks,
        alerting=frozenset(c for c in checks if any(matches(e, c, target) for e in alerting)),
        floors={**floors, **{c: a.floor for c, a in applied.items()}},
        applied=applied,
    )


def alerting_only(config: DetectorConfig) -> DetectorConfig:
    """``config`` running only the checks that may alert (model-wide and per feature).

    Examples
    --------
    >>> cfg = alerting_only(merge(service_defaults(), DetectorConfig(features={"x": {"alerting": ["ks"]}})))
    >>> plan(cfg, "x", "numeric").checks, plan(cfg, "y", "numeric").checks
    (('ks',), ('null_rate', 'type_mismatch', 'nonfinite', 'psi', 'mean_shift', 'variance_shift'))
    """
    features = {name: o.model_copy(update={"checks": config.alerting if o.alerting is None else o.alerting})
                for name, o in config.features.items()}
    return config.model_copy(update={"checks": config.alerting, "features": features})

