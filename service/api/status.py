"""Per-model status: what the service counted for one model (``GET /v1/models/{id}/status``)."""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import AlertStoreDep, SettingsDep, StoreDep, require_model
from service.api.errors import ErrorBody
from service.api.model_views import (
    FdrApplied,
    LabelCounts,
    LastWindow,
    ModelStatus,
    RecordCounts,
    WindowCounts,
    model_view,
)
from service.api.params import ModelId, json_example
from service.cohorts.store import STATS, CohortStore
from service.profiles.keys import REJECTED_FIELD, parse_member, pending_key, window_index_key
from service.registry import ModelConfig

router = APIRouter(prefix="/v1/models", tags=["models"])
SKIPPED = "skipped:"

STATUS_EXAMPLE = {
    "model_id": "fraud-v3", "records": {"in_evaluated_windows": 288_000, "late": 12, "future": 0,
                                         "dead_lettered": {"late": 12, "not_finite": 3},
                                         "rejected": {"not_finite": 1, "in_refused_batch": 99}},
    "windows": {"open": 1, "closed": 288, "pending_policy": 0, "evaluated": 287,
                "skipped": {"no_baseline": 1}, "abandoned": 0},
    "last_evaluated": {"window_start": 1_700_006_400, "window_end": 1_700_006_700,
                       "window_start_local": "2023-11-15T00:00:00+00:00", "version": "3",
                       "baseline": "reference", "evaluated_at": 1_700_006_712.4},
    "fdr": {"level": 0.0004, "window_start": 1_700_006_400, "tests": 24, "discoveries": 0},
    "baseline": {"configured": "auto", "last_used": "reference"},
    "floors": {"configured": {"psi": 0.2, "js": 0.1, "null_rate": 0.1}, "learned": None},
    "labels": {"joined": 48_210, "duplicate": 3, "relabeled": 0, "unknown": 0, "late": 12, "invalid": 0,
               "pending": 40}}


@router.get("/{model_id}/status", response_model=ModelStatus,
            summary="What the service counted for one model: records, windows, last evaluation, FDR, labels",
            responses={200: json_example(STATUS_EXAMPLE), 404: {"model": ErrorBody}})
async def model_status(model_id: ModelId, store: StoreDep, alerts: AlertStoreDep,
                       settings: SettingsDep) -> ModelStatus:
    await require_model(store, model_id)
    view = await model_view(store, settings, model_id)
    counted = await store.model_status(model_id)
    dropped = await store.dead_letters(settings.predictions_topic, model_id)
    last = None
    if "last_window" in counted:
        length, start, version = parse_member(counted["last_window"])
        cfg = view.config if isinstance(view.config, ModelConfig) else ModelConfig()
        last = LastWindow(window_start=start, window_end=start + length,
                          window_start_local=cfg.local_time(start), version=version,
                          baseline=counted["last_baseline"], evaluated_at=float(counted["last_evaluated_at"]))
    fdr = None
    gate = None if "last_fdr_window" not in counted else await alerts.gate(
        model_id, counted["last_fdr_window"])
    if gate is not None:  # None: never gated, or its record expired
        fdr = FdrApplied(level=gate["level"], window_start=parse_member(counted["last_fdr_window"])[1],
                         tests=len(gate["tests"]), discoveries=sum(t["discovered"] for t in gate["tests"]))
    labels = None
    if isinstance(view.config, ModelConfig) and view.config.joins_labels:
        cohorts = CohortStore(store.r)
        stats = await cohorts.stats(model_id)
        labels = LabelCounts(**{k: int(stats[k]) for k in STATS}, pending=await cohorts.parked(model_id))
    return ModelStatus(
        model_id=model_id,
        records=RecordCounts(in_evaluated_windows=int(counted.get("records", 0)), late=dropped.late,
                             future=dropped.future, dead_lettered=dropped.by_reason,
                             rejected={k[len(REJECTED_FIELD):]: int(v) for k, v in sorted(counted.items())
                                       if k.startswith(REJECTED_FIELD)}),
        windows=WindowCounts(
            open=await store.open_windows(settings.predictions_topic, model_id),
            closed=await store.r.zcard(window_index_key(model_id)), pending_policy=await store.r.zcard(
                pending_key(model_id)), evaluated=int(counted.get("evaluated", 0)),
            skipped={k[len(SKIPPED):]: int(v) for k, v in sorted(counted.items()) if k.startswith(SKIPPED)},
            abandoned=int(counted.get("abandoned", 0))),
        last_evaluated=last, fdr=fdr, baseline=view.baseline, floors=view.floors, labels=labels)
