"""Reference endpoints: build a model's reference profile from rows, read it summarised."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from pydantic import Field

from detectors.policy.learned import LearnedFloors
from detectors.strict import StrictModel
from sdk.record import RecordError
from service.api.deps import SettingsDep, StoreDep, require_model
from service.api.errors import ApiError, ErrorBody
from service.api.model_views import (
    BinEdges,
    DailyShapeView,
    ReferenceSummary,
    ReferenceUploaded,
    learned_floors_view,
)
from service.api.params import ModelId, json_example
from service.api.summary import TOP_CATEGORIES as TOP_PREDICTIONS
from service.api.summary import feature_summary, numeric_summary
from service.cohorts import CohortStore
from service.profiles.evaluation import model_detector_config
from service.profiles.reference import (
    FloorLearning,
    ReferenceColumns,
    build_reference,
    labelled_reference,
    learned_reference_floors,
    reference_shape,
)
from service.profiles.store import Store
from service.registry import ModelConfig
from service.settings import Settings
from sketches.bins import edge_version

router = APIRouter(prefix="/v1/models", tags=["models"])
MAX_REFERENCE_ROWS = 100_000

REFERENCE_EXAMPLE = {
    "model_id": "fraud-v3", "count": 50_000, "features": {"amount": {
        "kind": "numeric", "null_rate": 0.0, "null_count": 0, "inf_count": 0, "type_mismatch_count": 0,
        "count": 50_000, "min": 0.5, "max": 980.0, "mean": 42.1, "std": 51.3, "quantiles": {"p50": 27.0},
        "exact": False}},
    "score": {"count": 0}, "predictions": {},
    "edges": {"amount": {"version": "9f1c2a",
                         "edges": [3.1, 7.4, 12.0, 19.5, 27.0, 38.2, 55.0, 80.3, 141.0]}}}


class ReferenceUpload(StrictModel):
    rows: list[dict[str, Any]] = Field(..., max_length=MAX_REFERENCE_ROWS,
                                       description="One object per row: feature -> value")
    score_column: str | None = Field(None, min_length=1, description="Column holding the model score")
    label_column: str | None = Field(None, min_length=1,
                                     description="Column holding the predicted label")
    truth_column: str | None = Field(
        None, min_length=1,
        description="Column holding the true label (e.g. of the validation set): the labelled "
                    "reference becomes the baseline of the label-joined checks (tier-1 models "
                    "with performance)")
    time_column: str | None = Field(
        None, min_length=1,
        description="Column holding each row's event time (Unix seconds): the rows are then split "
                    "into the model's windows and each feature's floors learned from how much it "
                    "moves between them, and counted by time of day for the volume test's daily "
                    "shape (docs/detectors.md, learned floors and the daily shape)")
    replace: bool = Field(True, description="Replace the reference (else merge into it)")

    model_config = {"json_schema_extra": {"examples": [
        {"rows": [{"distance": 1089, "carrier": "UA", "score": 0.12}], "score_column": "score"}
    ]}}


@router.post(
    "/{model_id}/reference",
    summary="Build the model's reference profile from rows (at most 100,000 per request)",
    response_model=ReferenceUploaded,
    responses={200: json_example({"model_id": "fraud-v3", "count": 50_000,
                                  "features": ["", "carrier", "distance"]}),
               404: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
async def upload_reference(model_id: ModelId, body: ReferenceUpload, store: StoreDep,
                           settings: SettingsDep) -> ReferenceUploaded:
    await require_model(store, model_id)
    existing = None if body.replace else await store.reference(model_id)
    counters = None
    columns = ReferenceColumns(body.score_column, body.label_column, body.truth_column, body.time_column)
    try:
        profile = build_reference(model_id, body.rows, body.score_column, body.label_column,
                                  body.truth_column,
                                  edges=None if existing is None else existing.edge_set(),
                                  time_column=body.time_column)
        if body.truth_column is not None:
            cfg = (await store.model_configs([model_id]))[model_id]
            if not isinstance(cfg, ModelConfig) or not cfg.joins_labels:
                raise ApiError(422, "invalid_request", "truth_column: a labelled reference is the "
                               "baseline of label-joined checks; register the model with tier 1 and a "
                               "performance section first", "truth_column")
            counters = labelled_reference(body.rows, cfg.performance, body.truth_column,
                                          body.score_column, body.label_column)
    except RecordError as exc:
        raise ApiError(422, "invalid_row", exc.message, exc.field) from None
    if counters is not None:
        await CohortStore(store.r).put_reference_cohort(model_id, counters, body.replace)
    if existing is not None:
        profile = existing.merge(profile)
    floors = None if body.replace else await store.learned_floors(model_id)
    shape = None if body.replace else await store.daily_shape(model_id)
    cfg = await _model_config(store, model_id)
    grid = cfg.window_grid
    if body.time_column is not None:
        learned = await _learn_floors(store, settings, cfg, model_id, body.rows, profile, columns)
        floors = learned if floors is None or floors.window_seconds != learned.window_seconds \
            else floors.combined(learned)
        rows_shape = reference_shape(body.rows, body.time_column, grid)
        shape = rows_shape if shape is None else shape.merged(rows_shape)
    await store.put_reference(model_id, profile, floors, shape)
    return ReferenceUploaded(model_id=model_id, count=profile.count, features=sorted(profile.features),
                             learned_floors=None if floors is None else learned_floors_view(floors),
                             daily_shape=DailyShapeView.of(shape, grid))


async def _model_config(store: Store, model_id: str) -> ModelConfig:
    """The model's configuration (the defaults when the stored one does not read)."""
    cfg = (await store.model_configs([model_id]))[model_id]
    return cfg if isinstance(cfg, ModelConfig) else ModelConfig()


async def _learn_floors(store: Store, settings: Settings, cfg: ModelConfig, model_id: str,
                        rows: list[dict[str, Any]], reference: Any,
                        columns: ReferenceColumns) -> LearnedFloors:
    """The floors the rows teach the model of configuration ``cfg`` (in a thread: it tests
    every window of them)."""
    detector = await model_detector_config(store, settings, model_id)
    how = FloorLearning(settings.learned_floor_quantile, settings.learned_floor_min_windows,
                        settings.learned_floor_max_windows, settings.learned_floor_shuffles)
    try:
        return await asyncio.to_thread(learned_reference_floors, model_id, rows, reference, detector,
                                       cfg.window_seconds, cfg.window_origin, columns, how)
    except RecordError as exc:
        raise ApiError(422, "invalid_row", exc.message, exc.field) from None


@router.get("/{model_id}/reference", response_model=ReferenceSummary,
            summary="The model's reference profile, summarised",
            responses={200: json_example(REFERENCE_EXAMPLE), 404: {"model": ErrorBody}})
async def get_reference(model_id: ModelId, store: StoreDep) -> ReferenceSummary:
    await require_model(store, model_id)
    ref = await store.reference(model_id)
    if ref is None:
        raise ApiError(404, "reference_not_found", f"model {model_id!r} has no reference; POST "
                       f"/v1/models/{model_id}/reference uploads one", "model_id")
    return ReferenceSummary(
        model_id=model_id, count=ref.count,
        features={k: feature_summary(f) for k, f in sorted(ref.features.items())},
        score=numeric_summary(ref.score), predictions=ref.prediction.frequencies(TOP_PREDICTIONS),
        edges={name: BinEdges(version=edge_version(e), edges=e.tolist())
               for name, e in sorted((await store.edge_sets([model_id]))[model_id].items())},
        daily_shape=DailyShapeView.of(await store.daily_shape(model_id),
                                      (await _model_config(store, model_id)).window_grid))
