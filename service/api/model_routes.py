"""Model endpoints: list, register, read, change and delete a model's configuration."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import Field, ValidationError

from detectors.config import DetectorConfig, merge
from service.api.deps import SettingsDep, StoreDep, editable_detector_config, require_model
from service.api.errors import ApiError, ErrorBody
from service.api.merge_patch import merge_patch
from service.api.model_views import (
    DELETED,
    KEPT,
    DeletedView,
    ModelListed,
    ModelRegistered,
    ModelView,
    config_warnings,
    model_view,
)
from service.api.params import ModelId, Offset, json_example, limit_query
from service.registry import ModelConfig, ModelName
from service.stored import Unreadable, describe

router = APIRouter(prefix="/v1/models", tags=["models"])
MAX_MODELS_PAGE = 1_000

CONFIG_EXAMPLE = {
    "window_seconds": 300, "owner": "payments-ml", "tier": 1,
    "features": {"amount": {"type": "numeric", "source": "payments_db"},
                 "country": {"type": "categorical", "source": "geo_ip"}},
    "routing": {"team": "payments"}}
MODEL_EXAMPLE = {"model_id": "fraud-v3", "config": CONFIG_EXAMPLE}


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


@router.get("", summary="Monitored models, by id", response_model=list[ModelListed],
            responses={200: json_example([{**MODEL_EXAMPLE, "has_reference": True, "late_records": 0,
                                                   "future_records": 0}]),
                       422: {"model": ErrorBody}})
async def list_models(
    store: StoreDep,
    settings: SettingsDep,
    limit: Annotated[int, limit_query(MAX_MODELS_PAGE)] = 100,
    offset: Offset = 0,
) -> list[ModelListed]:
    ids = (await store.models())[offset:offset + limit]
    configs = await store.model_configs(ids)
    dropped = await store.dropped_records(settings.predictions_topic, ids)
    out = []
    for m in ids:
        cfg = configs.get(m) or ModelConfig()
        # A stored configuration that does not parse is shown as such (and counted), not
        # answered 500 for every model: PUT /v1/models/{id} replaces it.
        unreadable = isinstance(cfg, Unreadable)
        out.append(ModelListed(model_id=m, config=None if unreadable else cfg,
                               config_error=cfg.error if unreadable else None,
                               has_reference=await store.reference(m) is not None,
                               late_records=dropped[m].late, future_records=dropped[m].future))
    return out


@router.post("", status_code=201, summary="Register a model", response_model=ModelRegistered,
             responses={201: json_example(MODEL_EXAMPLE), 409: {"model": ErrorBody},
                        422: {"model": ErrorBody}})
async def register_model(body: ModelRegistration, store: StoreDep, settings: SettingsDep) -> ModelRegistered:
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
    return ModelRegistered(model_id=body.model_id, config=config, warnings=config_warnings(config, settings))


@router.put("/{model_id}", summary="Create or update a model's configuration", response_model=ModelRegistered,
            responses={200: json_example(MODEL_EXAMPLE), 422: {"model": ErrorBody}})
async def put_model(
    model_id: ModelId,
    config: Annotated[ModelConfig, Body(openapi_examples={
        "tier 1 with lineage": {"summary": "A business-critical model, features with their sources",
                                "value": CONFIG_EXAMPLE},
        "defaults": {"summary": "Every field at its default", "value": {}}})],
    store: StoreDep,
    settings: SettingsDep,
) -> ModelRegistered:
    refuse_unjoined_performance(config)
    await store.put_model_config(model_id, config)
    return ModelRegistered(model_id=model_id, config=config, warnings=config_warnings(config, settings))


def refuse_unjoined_performance(config: ModelConfig) -> None:
    """422 naming ``performance`` for a configuration whose labels would silently not join."""
    reason = config.unjoined_performance()
    if reason is not None:
        raise ApiError(422, "invalid_request", reason, "performance")


MODEL_VIEW_EXAMPLE = {
    "model_id": "fraud-v3", "registered": True, "config": ModelConfig.model_validate_json(
        json.dumps(CONFIG_EXAMPLE)).model_dump(mode="json"),
    "config_error": None, "lineage": {"geo_ip": ["country"], "payments_db": ["amount"]},
    "baseline": {"configured": "auto", "last_used": "reference"},
    "floors": {"configured": {"psi": 0.2, "js": 0.1, "null_rate": 0.1}, "learned": {
        "source": "reference", "window_seconds": 300, "quantile": 0.95, "windows": 288, "note": None,
        "floors": {"amount": {"psi": {"floor": 0.31, "movement": 0.36, "noise": 0.05, "windows": 288}}}}},
    "reference": {"count": 50_000, "features": ["", "amount", "country"]}}
PATCH_EXAMPLES = {
    "raise the tier": {"summary": "Make the model business critical, keep everything else",
                       "value": {"tier": 1}},
    "one routing label": {"summary": "Change one routing label, remove the owner",
                          "value": {"routing": {"channel": "#fraud-oncall"}, "owner": None}},
    "performance": {"summary": "Turn on label-joined performance with a 0.7 threshold",
                    "value": {"tier": 1, "performance": {"threshold": 0.7}}}}


@router.get("/{model_id}", response_model=ModelView, summary="A model: configuration, lineage, baseline, "
            "reference", responses={200: json_example(MODEL_VIEW_EXAMPLE), 404: {"model": ErrorBody}})
async def get_model(model_id: ModelId, store: StoreDep, settings: SettingsDep) -> ModelView:
    await require_model(store, model_id)
    return await model_view(store, settings, model_id)


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
    store: StoreDep,
    settings: SettingsDep,
) -> ModelView:
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
    return await model_view(store, settings, model_id)


@router.delete(
    "/{model_id}", response_model=DeletedView, summary="Delete a model and everything stored under it",
    description="Deletes: " + "; ".join(DELETED) + ". Keeps: " + "; ".join(KEPT) + ".",
    responses={200: json_example({"model_id": "fraud-v3", "deleted_keys": 412, "deleted": DELETED,
                                  "kept": KEPT}), 404: {"model": ErrorBody}})
async def delete_model(model_id: ModelId, store: StoreDep) -> DeletedView:
    await require_model(store, model_id)
    deleted = await store.delete_model(model_id)
    return DeletedView(model_id=model_id, deleted_keys=deleted.keys, deleted=DELETED, kept=KEPT)
