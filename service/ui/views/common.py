"""The dashboard pages' context and what every page shows alike (labels, effect/floor)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from detectors.multivariate import MULTIVARIATE_FEATURE
from service.alerting.store import AlertStore
from service.profiles.store import Store
from service.registry import ModelConfig
from service.settings import Settings
from service.stored import Unreadable

OUTPUTS = {"__score__": "score", "__prediction__": "prediction",
           MULTIVARIATE_FEATURE: "numeric features jointly", "": "window"}


@dataclass(frozen=True)
class Ctx:
    store: Store
    alerts: AlertStore
    settings: Settings


def ratio(r: dict[str, Any]) -> float | None:
    """|effect| / floor of a stored result (None when it has no effect or no floor)."""
    e, f = r.get("effect_size"), r.get("floor") or 0.0
    if e is None or f <= 0:
        return None
    return abs(e) / f


def feature_label(name: str) -> str:
    """How a results' feature name reads: model outputs and window-level tests by role."""
    return OUTPUTS.get(name, name)


DEFAULT = ModelConfig()


def config_of(raw: ModelConfig | Unreadable | None) -> ModelConfig:
    """The model's configuration; the defaults when it has none or its stored one does not
    parse (``Store.model_configs`` logs and counts that)."""
    return raw if isinstance(raw, ModelConfig) else DEFAULT
