"""Model endpoints: list, configure, reference upload, window profiles."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Request
from pydantic import Field, ValidationError

from detectors.config import DetectorConfig, merge
from detectors.policy.learned import LearnedFloors
from detectors.strict import StrictModel
from sdk.record import RecordError
from service.api.deps import require_model, store_of
from service.api.errors import ApiError, ErrorBody
from service.api.merge_patch import merge_patch
from service.api.model_views import (
    DELETED,
    KEPT,
    BaselineView,
    BinEdges,
    DeletedView,
    FloorsView,
    ModelView,
    ReferenceBrief,
    ReferenceSummary,
    learned_floors_view,
)
from service.api.params import ModelId, Offset, limit_query
from service.api.summary import TOP_CATEGORIES as TOP_PREDICTIONS
from service.api.summary import feature_summary, numeric_summary, window_summary
from service.cohorts import CohortStore
from service.profiles.evaluation import model_detector_config
from service.profiles.keys import parse_member
from service.profiles.reference import (
    FloorLearning,
    ReferenceColumns,
    build_reference,
    labelled_reference,
    learned_reference_floors,
)
from service.profiles.rollups import DAY, HOUR
from service.profiles.store import Store
from service.registry import ModelConfig, ModelName, traffic_warnings
from service.stored import Unreadable, describe
from sketches.bins import edge_version

router = APIRouter(prefix="/v1/models", tags=["models"])
MAX_REFERENCE_ROWS = 100_000
MAX_WINDOWS = 1_000
MAX_MODELS_PAGE = 1_000

CONFIG_EXAMPLE = {
    "window_seconds": 300, "owner": "payments-ml", "tier": 1,
    "features": {"amount": {"type": "numeric", "source": "payments_db"},
                 "country": {"type": "categorical", "source": "geo_ip"}},
    "routing": {"team": "payments"}}
MODEL_EXAMPLE = {"model_id": "fraud-v3", "config": CONFIG_EXAMPLE}


def json_example(example: Any, description: str = "Successful Response") -> dict[str, Any]:
    """An OpenAPI response entry with an example body (for ``responses={200: ...}``)."""
    return {"description": description, "content": {"application/json": {"example": example}}}


async def editable_detector_config(store: Store, model_id: str) -> DetectorConfig:
    """The model's stored detector configuration to change: empty when it has none, or
    when the stored one does not parse (the write replaces it)."""
    own = await store.own_detector_config(model_id)
    return own if isinstance(own, DetectorConfig) else DetectorConfig()


async def config_in_force(store: Store, model_id: str) -> ModelConfig:
    """The model's configuration as the workers read it (the defaults when it has none or
    it does not parse): its windows' grid and time zone."""
    stored = (await store.model_configs([model_id]))[model_id]
    return stored if isinstance(stored, ModelConfig) else ModelConfig()


class ReferenceUpload(StrictModel):
    rows: list[dict[str, Any]] = Field(..., max_length=MAX_REFERENCE_ROWS,
                                       description="One object per row: feature -> value")
    score_column: str | None = Field(None, description="Column holding the model score")
    label_column: str | None = Field(None, description="Column holding the predicted label")
    truth_column: str | None = Field(
        None, description="Column holding the true label (e.g. of the validation set): the labelled "
                          "reference becomes the baseline of the label-joined checks (tier-1 models "
                          "with performance)")
    time_column: str | None = Field(
        None, description="Column holding each row's event time (Unix seconds): the rows are then split "
                          "into the model's windows and each feature's floors learned from how much it "
                          "moves between them (docs/detectors.md, learned floors)")
    replace: bool = Field(True, description="Replace the reference (else merge into it)")

    model_config = {"json_schema_extra": {"examples": [
        {"rows": [{"distance": 1089, "carrier": "UA", "score": 0.12}], "score_column": "score"}
    ]}}


class ModelRegistration(ModelConfig):
    """The body of ``POST /v1/models``: the model's id, configuration and effect floors."""

    model_id: ModelName = Field(..., description="The model's id, as the SDK sends it: 1 to 256 "
                                                 "printable characters, no '/' or '\\', not '.' or '..'")
    floors: dict[str, float] = Field(
        default_factory=dict, description="Effect floor per check (e.g. psi: 0.25), on top of the defaults "
                                          "(the detector configuration's `floors`)")

    model_config = {"json_schema_extra": {"examples": [{
        "model_id": "fraud-v3", "owner": "payments-ml", "tier": 1,
        "features": {"amount": {"type": "numeric", "source": "payments_db"},
                     "country": {"type": "categorical", "source": "geo_ip"}},
        "floors": {"psi": 0.25}, "routing": {"team": "payments"}}]}}


@router.get("", summary="Monitored models, by id",
            responses={200: json_example([{**MODEL_EXAMPLE, "has_reference": True, "late_records": 0,
                                                   "future_records": 0}]),
                       422: {"model": ErrorBody}})
async def list_models(
    request: Request,
    limit: Annotated[int, limit_query(MAX_MODELS_PAGE)] = 100,
    offset: Offset = 0,
) -> list[dict[str, Any]]:
    store = store_of(request)
    ids = (await store.models())[offset:offset + limit]
    configs = await store.model_configs(ids)
    dropped = await store.dropped_records(request.app.state.settings.predictions_topic, ids)
    out = []
    for m in ids:
        cfg = configs.get(m) or ModelConfig()
        # A stored configuration that does not parse is shown as such (and counted), not
        # answered 500 for every model: PUT /v1/models/{id} replaces it.
        unreadable = isinstance(cfg, Unreadable)
        out.append({"model_id": m, "config": None if unreadable else cfg.model_dump(),
                    "config_error": cfg.error if unreadable else None,
                    "has_reference": await store.reference(m) is not None,
                    "late_records": dropped[m].late, "future_records": dropped[m].future})
    return out


@router.post("", status_code=201, summary="Register a model",
             responses={201: json_example(MODEL_EXAMPLE), 409: {"model": ErrorBody},
                        422: {"model": ErrorBody}})
async def register_model(body: ModelRegistration, request: Request) -> dict[str, Any]:
    store = store_of(request)
    if (await store.model_configs([body.model_id]))[body.model_id] is not None:
        raise ApiError(409, "model_exists", f"model {body.model_id!r} is registered; PUT "
                       f"/v1/models/{body.model_id} replaces its configuration", "model_id")
    try:
        floors = DetectorConfig(floors=body.floors)
    except ValidationError as exc:
        raise ApiError(422, "invalid_request", f"floors: {exc.errors()[0]['msg']}", "floors") from None
    config = ModelConfig.model_validate(body.model_dump(exclude={"model_id", "floors"}))
    refuse_unjoined_performance(config)
    if body.floors:
        current = await editable_detector_config(store, body.model_id)
        await store.put_detector_config(body.model_id, merge(current, floors))
    await store.put_model_config(body.model_id, config)
    return {"model_id": body.model_id, "config": config.model_dump(),
            "warnings": config_warnings(config, request.app.state.settings)}


@router.put("/{model_id}", summary="Create or update a model's configuration",
            responses={200: json_example(MODEL_EXAMPLE), 422: {"model": ErrorBody}})
async def put_model(
    model_id: ModelId,
    config: Annotated[ModelConfig, Body(openapi_examples={
        "tier 1 with lineage": {"summary": "A business-critical model, features with their sources",
                                "value": CONFIG_EXAMPLE},
        "defaults": {"summary": "Every field at its default", "value": {}}})],
    request: Request,
) -> dict[str, Any]:
    refuse_unjoined_performance(config)
    await store_of(request).put_model_config(model_id, config)
    return {"model_id": model_id, "config": config.model_dump(),
            "warnings": config_warnings(config, request.app.state.settings)}


def config_warnings(config: ModelConfig, settings: Any) -> list[str]:
    """The warnings registration answers (:func:`service.registry.traffic_warnings`)."""
    return traffic_warnings(config, settings.pool_min_records, settings.pool_max_windows)


def refuse_unjoined_performance(config: ModelConfig) -> None:
    """422 naming ``performance`` for a configuration whose labels would silently not join."""
    reason = config.unjoined_performance()
    if reason is not None:
        raise ApiError(422, "invalid_request", reason, "performance")


@router.post(
    "/{model_id}/reference",
    summary="Build the model's reference profile from rows (at most 100,000 per request)",
    responses={200: json_example({"model_id": "fraud-v3", "count": 50_000,
                                  "features": ["", "carrier", "distance"]}),
               404: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
async def upload_reference(model_id: ModelId, body: ReferenceUpload, request: Request) -> dict[str, Any]:
    store = store_of(request)
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
    if body.time_column is not None:
        learned = await _learn_floors(store, request.app.state.settings, model_id, body.rows, profile,
                                      columns)
        floors = learned if floors is None or floors.window_seconds != learned.window_seconds \
            else floors.combined(learned)
    await store.put_reference(model_id, profile, floors)
    return {"model_id": model_id, "count": profile.count, "features": sorted(profile.features),
            "learned_floors": None if floors is None else learned_floors_view(floors)}


async def _learn_floors(store: Store, settings: Any, model_id: str, rows: list[dict[str, Any]],
                        reference: Any, columns: ReferenceColumns) -> LearnedFloors:
    """The floors the rows teach (in a thread: it tests every window of them)."""
    cfg = (await store.model_configs([model_id]))[model_id]
    cfg = cfg if isinstance(cfg, ModelConfig) else ModelConfig()
    detector = await model_detector_config(store, settings, model_id)
    how = FloorLearning(settings.learned_floor_quantile, settings.learned_floor_min_windows,
                        settings.learned_floor_max_windows, settings.learned_floor_shuffles)
    try:
        return await asyncio.to_thread(learned_reference_floors, model_id, rows, reference, detector,
                                       cfg.window_seconds, cfg.window_origin, columns, how)
    except RecordError as exc:
        raise ApiError(422, "invalid_row", exc.message, exc.field) from None


GRANULARITY = {"window": None, "hour": HOUR, "day": DAY}
MODEL_VIEW_EXAMPLE = {
    "model_id": "fraud-v3", "registered": True, "config": ModelConfig.model_validate_json(
        json.dumps(CONFIG_EXAMPLE)).model_dump(mode="json"),
    "config_error": None, "lineage": {"geo_ip": ["country"], "payments_db": ["amount"]},
    "baseline": {"configured": "auto", "last_used": "reference"},
    "floors": {"configured": {"psi": 0.2, "js": 0.1, "null_rate": 0.1}, "learned": {
        "source": "reference", "window_seconds": 300, "quantile": 0.95, "windows": 288, "note": None,
        "floors": {"amount": {"psi": {"floor": 0.31, "movement": 0.36, "noise": 0.05, "windows": 288}}}}},
    "reference": {"count": 50_000, "features": ["", "amount", "country"]}}
REFERENCE_EXAMPLE = {
    "model_id": "fraud-v3", "count": 50_000, "features": {"amount": {
        "kind": "numeric", "null_rate": 0.0, "null_count": 0, "inf_count": 0, "type_mismatch_count": 0,
        "count": 50_000, "min": 0.5, "max": 980.0, "mean": 42.1, "std": 51.3, "quantiles": {"p50": 27.0},
        "exact": False}},
    "score": {"count": 0}, "predictions": {},
    "edges": {"amount": {"version": "9f1c2a",
                         "edges": [3.1, 7.4, 12.0, 19.5, 27.0, 38.2, 55.0, 80.3, 141.0]}}}
PATCH_EXAMPLES = {
    "raise the tier": {"summary": "Make the model business critical, keep everything else",
                       "value": {"tier": 1}},
    "one routing label": {"summary": "Change one routing label, remove the owner",
                          "value": {"routing": {"channel": "#fraud-oncall"}, "owner": None}},
    "performance": {"summary": "Turn on label-joined performance with a 0.7 threshold",
                    "value": {"tier": 1, "performance": {"threshold": 0.7}}}}


async def model_view(store: Store, settings: Any, model_id: str) -> ModelView:
    """The model as ``GET /v1/models/{id}`` answers it (404 when unknown)."""
    await require_model(store, model_id)
    stored = (await store.model_configs([model_id]))[model_id]
    unreadable = isinstance(stored, Unreadable)
    config = None if unreadable else stored or ModelConfig()
    lineage: dict[str, list[str]] = {}
    for name, decl in sorted((config.features if config else {}).items()):
        if decl.source is not None:
            lineage.setdefault(decl.source, []).append(name)
    reference = await store.reference(model_id)
    detector = await model_detector_config(store, settings, model_id)
    status = await store.model_status(model_id)
    learned = await store.learned_floors(model_id)
    return ModelView(
        model_id=model_id, registered=stored is not None, config=config,
        config_error=stored.error if unreadable else None, lineage=dict(sorted(lineage.items())),
        baseline=BaselineView(configured=detector.baseline.kind, last_used=status.get("last_baseline")),
        floors=FloorsView(configured=detector.floors, learned=None if learned is None
                          else learned_floors_view(learned)),
        warnings=[] if config is None else config_warnings(config, settings),
        reference=None if reference is None else ReferenceBrief(count=reference.count,
                                                                features=sorted(reference.features)))


@router.get("/{model_id}", response_model=ModelView, summary="A model: configuration, lineage, baseline, "
            "reference", responses={200: json_example(MODEL_VIEW_EXAMPLE), 404: {"model": ErrorBody}})
async def get_model(model_id: ModelId, request: Request) -> ModelView:
    return await model_view(store_of(request), request.app.state.settings, model_id)


@router.patch(
    "/{model_id}", response_model=ModelView,
    summary="Change some fields of a model's configuration (JSON merge patch, RFC 7396)",
    description="Members of the body replace the stored configuration's, objects merge into its "
                "objects, `null` puts a field back to its default, lists are replaced whole. The result "
                "is validated exactly like `PUT /v1/models/{id}` (422 naming the field). Sent as "
                "`application/json` or `application/merge-patch+json`.",
    responses={200: json_example(MODEL_VIEW_EXAMPLE), 404: {"model": ErrorBody},
               409: {"model": ErrorBody}, 422: {"model": ErrorBody}})
async def patch_model(
    model_id: ModelId,
    patch: Annotated[dict[str, Any], Body(openapi_examples=PATCH_EXAMPLES)],
    request: Request,
) -> ModelView:
    store = store_of(request)
    await require_model(store, model_id)
    stored = (await store.model_configs([model_id]))[model_id]
    if isinstance(stored, Unreadable):
        raise ApiError(409, "config_unreadable", f"the stored configuration of {model_id!r} does not parse "
                       f"({stored.error}); PUT /v1/models/{model_id} replaces it", "model_id")
    current = (stored or ModelConfig()).model_dump(mode="json")
    try:
        config = ModelConfig.model_validate_json(json.dumps(merge_patch(current, patch)))
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise ApiError(422, "invalid_request", describe(exc, 1), field or None) from None
    await store.put_model_config(model_id, config)
    return await model_view(store, request.app.state.settings, model_id)


@router.delete(
    "/{model_id}", response_model=DeletedView, summary="Delete a model and everything stored under it",
    description="Deletes: " + "; ".join(DELETED) + ". Keeps: " + "; ".join(KEPT) + ".",
    responses={200: json_example({"model_id": "fraud-v3", "deleted_keys": 412, "deleted": DELETED,
                                  "kept": KEPT}), 404: {"model": ErrorBody}})
async def delete_model(model_id: ModelId, request: Request) -> DeletedView:
    store = store_of(request)
    await require_model(store, model_id)
    deleted = await store.delete_model(model_id)
    return DeletedView(model_id=model_id, deleted_keys=deleted.keys, deleted=DELETED, kept=KEPT)


@router.get("/{model_id}/reference", response_model=ReferenceSummary,
            summary="The model's reference profile, summarised",
            responses={200: json_example(REFERENCE_EXAMPLE), 404: {"model": ErrorBody}})
async def get_reference(model_id: ModelId, request: Request) -> ReferenceSummary:
    store = store_of(request)
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
               for name, e in sorted((await store.edge_sets([model_id]))[model_id].items())})


@router.get(
    "/{model_id}/profiles",
    summary="Profiles in a time range (versions merged), from windows or rollups",
    description="Oldest first. Paged by `limit` and `offset` (the granularity `auto` picks does not "
                "depend on `offset`, so pages agree), or by time: the next page starts at `from` = the last "
                "`window_start` + 1.",
    responses={200: json_example({"model_id": "fraud-v3", "granularity": "window", "windows": [
        {"window_start": 1_700_006_400, "window_end": 1_700_006_700,
         "window_start_local": "2023-11-15T00:00:00+00:00", "count": 1000,
         "insufficient_data": False, "versions": {"3": 1000},
         "features": {"amount": {"kind": "numeric", "null_rate": 0.0, "null_count": 0, "inf_count": 0,
                                 "type_mismatch_count": 0, "count": 1000, "min": 0.5, "max": 980.0,
                                 "mean": 42.1, "std": 51.3, "quantiles": {"p50": 27.0}, "exact": False}},
         "score": {"count": 1000, "mean": 0.07}}]},
        "Profile summaries, oldest first (fields as in docs/profiles.md)"),
        404: {"model": ErrorBody}, 422: {"model": ErrorBody}},
)
async def profiles(
    model_id: ModelId,
    request: Request,
    from_: Annotated[
        datetime | None, Query(alias="from", description="Window start >= (ISO 8601 or Unix s)")
    ] = None,
    to: Annotated[datetime | None, Query(description="Window start <= (ISO 8601 or Unix s)")] = None,
    granularity: Annotated[Literal["auto", "window", "hour", "day"], Query(
        description="window: closed windows; hour / day: rollups; auto: the finest that holds "
                    "the range in at most `limit` profiles")] = "auto",
    limit: Annotated[int, limit_query(MAX_WINDOWS)] = 200,
    offset: Offset = 0,
) -> dict[str, Any]:
    store = store_of(request)
    await require_model(store, model_id)
    lo = from_.replace(tzinfo=from_.tzinfo or UTC).timestamp() if from_ else 0
    hi = to.replace(tzinfo=to.tzinfo or UTC).timestamp() if to else float("inf")
    if lo > hi:
        raise ApiError(422, "invalid_request", "from must not be after to", "from")
    name = granularity
    for name in list(GRANULARITY) if granularity == "auto" else [granularity]:  # finest first
        grouped = await _grouped(store, model_id, lo, hi, GRANULARITY[name])
        if grouped and len(grouped) <= limit:
            break
    windows = []
    cfg = await config_in_force(store, model_id)
    for ms in list(grouped.values())[offset:offset + limit]:
        parts = await store.window_profiles(model_id, ms, GRANULARITY[name])
        if parts:
            merged = parts[0]
            for p in parts[1:]:
                merged.merge(p)
            windows.append({**window_summary(merged),
                            "window_start_local": cfg.local_time(merged.window_start)})
    return {"model_id": model_id, "granularity": name, "windows": windows}


async def _grouped(store: Store, model_id: str, lo: float, hi: float,
                   granularity: int | None) -> dict[tuple[int, int], list[str]]:
    """Index members in ``[lo, hi]`` by (start, length), in start order (versions together)."""
    out: dict[tuple[int, int], list[str]] = {}
    for m in await store.window_members(model_id, lo, hi, granularity):
        length, start, _v = parse_member(m)
        out.setdefault((start, length), []).append(m)
    return dict(sorted(out.items()))
