"""Drift endpoints: every feature's test results for a window, and detector configuration."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query
from pydantic import BaseModel, Field

from detectors.config import CheckOverrides, DetectorConfig
from service.api.deps import SettingsDep, StoreDep, config_in_force, editable_detector_config, require_model
from service.api.errors import ApiError, ErrorBody
from service.api.params import ModelId, json_example
from service.profiles.evaluation import evaluate_member, model_detector_config
from service.profiles.keys import parse_member
from service.profiles.store import Store
from service.settings import Settings
from service.stored import Unreadable

router = APIRouter(prefix="/v1/models", tags=["drift"])

DRIFT_EXAMPLE = {"model_id": "fraud-v3", "windows": [{
    "version": "3", "window_start": 1_700_006_400, "window_end": 1_700_006_700,
    "window_start_local": "2023-11-15T00:00:00+00:00", "source": "stored",
    "baseline": "reference", "features": {"amount": [{
        "check": "psi", "feature": "amount", "statistic": 0.41, "effect_size": 0.41, "p_value": 1.2e-9,
        "n_current": 1000, "n_baseline": 50_000, "error_bound": 0.004, "status": "drift",
        "reason": "PSI 0.41 above its floor 0.2", "floor": 0.2}]}}]}
CONFIG_VIEW_EXAMPLE = {"model_id": "fraud-v3",
                       "config": {"floors": {"psi": 0.25}, "features": {"zip": {"alerting": ["null_rate"]}}},
                       "effective": {"checks": None, "alerting": None, "floors": {"psi": 0.25},
                                     "alpha": 0.01, "baseline": {"kind": "auto"},
                                     "features": {"zip": {"alerting": ["null_rate"]}}}}
DETECTOR_CONFIG_EXAMPLES = {
    "floors": {"summary": "Raise the PSI floor, alert on data quality only for zip",
               "value": {"floors": {"psi": 0.25}, "features": {"zip": {"alerting": ["null_rate"]}}}},
    "seasonal": {"summary": "Compare with the same hour of the last 4 weeks",
                 "value": {"baseline": {"kind": "seasonal", "seasonal_weeks": 4}, "alpha": 0.005}},
}
FEATURE_OVERRIDE_EXAMPLES = {
    "quality only": {"summary": "Run every check, alert only on the null rate",
                     "value": {"alerting": ["null_rate"], "floors": {"null_rate": 0.05}}},
}
Feature = Annotated[str, Path(description="Feature name", openapi_examples={"feature": {"value": "amount"}})]


class DriftWindow(BaseModel):
    """One window (of one model version) of ``GET /v1/models/{id}/drift``."""

    version: str
    window_start: int
    window_end: int
    window_start_local: str = Field(..., description="window_start in the model's time zone (ISO 8601)")
    source: str = Field(..., description="stored: the detector's results; computed: tested now (the "
                                         "detector has not reached the window); none: it cannot be tested")
    baseline: str | None = Field(..., description="What the window was compared with")
    baseline_note: str | None = Field(None, description="Why that baseline (e.g. seasonal slots missing)")
    pool_note: str | None = Field(None, description="Tested together with the windows before it")
    features: dict[str, list[dict[str, Any]]] = Field(
        ..., description="Feature -> its checks' results (check, statistic, effect_size, p_value, floor, "
                         "status, reason, ...; docs/detectors.md)")
    reason: str | None = Field(None, description="Why the window cannot be tested (no_profile, "
                                                 "no_baseline); source none only")


class DriftView(BaseModel):
    model_id: str
    windows: list[DriftWindow] = Field(..., description="The window's versions, by version")


class DetectorConfigView(BaseModel):
    """A model's detector configuration: its own and the one in force."""

    model_id: str
    config: dict[str, Any] | None = Field(..., description="The model's own settings, as stored (null "
                                                           "when unreadable)")
    config_error: str | None = Field(None, description="Why the stored configuration does not parse")
    effective: DetectorConfig = Field(..., description="The service defaults with the model's own on top")


def _by_feature(results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        out.setdefault(r["feature"], []).append(
            {k: v for k, v in r.items() if k not in ("baseline", "baseline_note", "pool_note")})
    return out


@router.get(
    "/{model_id}/drift",
    summary="Every feature's drift and data-quality results for one window",
    description="One window (per model version), not a list: the results of every feature of it. "
                "Unpaged; the number of results is bounded by the features profiled per model "
                "(FLEETWATCH_MAX_FEATURES_PER_MODEL) times the checks.",
    response_model=DriftView, response_model_exclude_unset=True,
    responses={200: json_example(DRIFT_EXAMPLE), 404: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
async def drift(
    model_id: ModelId,
    store: StoreDep,
    settings: SettingsDep,
    window: Annotated[datetime | None, Query(
        description="Window start (ISO 8601 or Unix s); default: the latest window")] = None,
    version: Annotated[str | None, Query(description="Only this model version")] = None,
) -> DriftView:
    await require_model(store, model_id)
    if window is None:
        members = await store.window_members(model_id, 0, float("inf"))
        if members:
            last = max(parse_member(m)[1] for m in members)
            members = [m for m in members if parse_member(m)[1] == last]
    else:
        start = window.replace(tzinfo=window.tzinfo or UTC).timestamp()
        members = await store.window_members(model_id, start, start)
    members = [m for m in members if version is None or parse_member(m)[2] == version]
    if not members:
        raise ApiError(404, "window_not_found", f"no window of model {model_id!r} starts there",
                       "window")
    versions = []
    cfg = await config_in_force(store, model_id)
    for member in sorted(members):
        length, start_s, ver = parse_member(member)
        stored = await store.results(model_id, member)
        entry: dict[str, Any] = {"version": ver, "window_start": start_s, "window_end": start_s + length,
                                 "window_start_local": cfg.local_time(start_s)}
        if stored is not None:
            entry.update(source="stored", baseline=stored[0]["baseline"] if stored else None,
                         baseline_note=stored[0].get("baseline_note") if stored else None,
                         pool_note=stored[0].get("pool_note") if stored else None,
                         features=_by_feature(stored))
        else:
            outcome = await evaluate_member(store, settings, model_id, member, grid=cfg.window_grid)
            if isinstance(outcome, str):
                entry.update(source="none", baseline=None, features={}, reason=outcome)
            else:
                _current, baseline, _config, results, pooled = outcome
                entry.update(source="computed", baseline=baseline.kind, baseline_note=baseline.note,
                             pool_note=pooled, features=_by_feature([asdict(r) for r in results]))
        versions.append(DriftWindow(**entry))
    return DriftView(model_id=model_id, windows=versions)


async def detector_config_view(store: Store, settings: Settings, model_id: str) -> DetectorConfigView:
    """What the detector-config routes answer."""
    own = await store.own_detector_config(model_id) or DetectorConfig()
    effective = await model_detector_config(store, settings, model_id)
    unreadable = isinstance(own, Unreadable)
    return DetectorConfigView(model_id=model_id,
                              config=None if unreadable else own.model_dump(exclude_unset=True),
                              config_error=own.error if unreadable else None, effective=effective)


@router.get("/{model_id}/detector-config", summary="A model's detector configuration",
            response_model=DetectorConfigView,
            responses={200: json_example(CONFIG_VIEW_EXAMPLE), 404: {"model": ErrorBody}})
async def get_detector_config(model_id: ModelId, store: StoreDep,
                              settings: SettingsDep) -> DetectorConfigView:
    await require_model(store, model_id)
    return await detector_config_view(store, settings, model_id)


@router.put("/{model_id}/detector-config", summary="Set a model's detector configuration",
            response_model=DetectorConfigView,
            responses={200: json_example(CONFIG_VIEW_EXAMPLE), 422: {"model": ErrorBody}})
async def put_detector_config(
    model_id: ModelId,
    config: Annotated[DetectorConfig, Body(openapi_examples=DETECTOR_CONFIG_EXAMPLES)],
    store: StoreDep,
    settings: SettingsDep,
) -> DetectorConfigView:
    await store.put_detector_config(model_id, config)
    return await detector_config_view(store, settings, model_id)


@router.put("/{model_id}/detector-config/features/{feature}",
            summary="Set one feature's checks, alerting checks and floors", response_model=DetectorConfigView,
            responses={200: json_example(CONFIG_VIEW_EXAMPLE), 404: {"model": ErrorBody},
                       422: {"model": ErrorBody}})
async def put_feature_config(
    model_id: ModelId,
    feature: Feature,
    overrides: Annotated[CheckOverrides, Body(openapi_examples=FEATURE_OVERRIDE_EXAMPLES)],
    store: StoreDep,
    settings: SettingsDep,
) -> DetectorConfigView:
    await require_model(store, model_id)
    config = await editable_detector_config(store, model_id)
    config.features[feature] = overrides
    config.model_fields_set.add("features")
    await store.put_detector_config(model_id, config)
    return await detector_config_view(store, settings, model_id)


@router.delete("/{model_id}/detector-config/features/{feature}",
               summary="Remove one feature's overrides", response_model=DetectorConfigView,
               responses={200: json_example(CONFIG_VIEW_EXAMPLE), 404: {"model": ErrorBody}})
async def delete_feature_config(model_id: ModelId, feature: Feature, store: StoreDep,
                                settings: SettingsDep) -> DetectorConfigView:
    await require_model(store, model_id)
    config = await editable_detector_config(store, model_id)
    if config.features.pop(feature, None) is None:
        raise ApiError(404, "feature_not_configured", f"feature {feature!r} has no overrides", "feature")
    await store.put_detector_config(model_id, config)
    return await detector_config_view(store, settings, model_id)
