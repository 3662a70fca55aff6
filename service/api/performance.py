"""Performance endpoint: label-joined cohorts (whole model or one slice) with realized and
estimated metrics and maturity."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from detectors.performance.maturity import maturity
from detectors.performance.report import estimated_metrics, realized_metrics
from service.api.deps import StoreDep, require_model
from service.api.errors import ApiError, ErrorBody
from service.api.params import ModelId, Offset, json_example, limit_query
from service.cohorts import CohortStore, codec_for, parse_slice_label, slice_id
from service.registry import ModelConfig

router = APIRouter(prefix="/v1/models", tags=["performance"])
MAX_COHORTS = 1_000
MAX_SLICE_PARAM = 2_048

PERFORMANCE_EXAMPLE = {
    "model_id": "fraud-v3", "task": "binary", "threshold": 0.5, "slice": None,
    "slice_values": {"country": ["DE", "FR"]},
    "labels": {"joined": 48_210, "duplicate": 3, "relabeled": 0, "unknown": 0, "late": 12,
               "invalid": 0},
    "cohorts": [{
        "window_start": 1_700_006_400, "window_end": 1_700_006_700,
        "window_start_local": "2023-11-15T00:00:00+00:00", "predictions": 1000, "labeled": 940,
        "maturity": {"mature": True, "labeled_fraction": 0.94, "reason": "labeled"},
        "realized": {"roc_auc": 0.91, "log_loss": 0.21, "brier_score": 0.05, "ece": 0.02, "precision": 0.62,
                     "recall": 0.55, "f1": 0.58, "accuracy": 0.95, "average_precision": 0.6,
                     "positive_rate": 0.04},
        "estimated": {"accuracy": 0.95, "precision": 0.6, "recall": 0.57, "f1": 0.58, "roc_auc": 0.9},
        "evaluation": None}]}

SLICE_HELP = ("One slice's cohorts instead of the whole model's: `<key>:<value>`, the key one of the "
              "model's `slice_features` (e.g. `country:DE`; `country:__other__` is the values beyond "
              "`max_slice_values`). The value may contain `:`.")


class MaturityView(BaseModel):
    mature: bool = Field(..., description="Enough of the cohort is labelled, or its labels' horizon passed")
    labeled_fraction: float | None = Field(..., description="Labelled predictions / predictions")
    reason: str = Field(..., description="Why it is (not yet) mature")


class CohortView(BaseModel):
    """One window's label-joined cohort."""

    window_start: int
    window_end: int
    window_start_local: str = Field(..., description="window_start in the model's time zone (ISO 8601)")
    predictions: int = Field(..., description="Predictions kept for the join")
    labeled: int = Field(..., description="Of those, the labelled ones")
    maturity: MaturityView
    realized: dict[str, Any] = Field(..., description="Metrics on the labelled predictions (null with a "
                                                     "`<metric>_reason` when undefined; docs/performance.md)")
    estimated: dict[str, Any] = Field(..., description="Metrics estimated from the scores (confidence-"
                                                      "based, before labels arrive)")
    evaluation: dict[str, Any] | None = Field(..., description="The cohort's test against its baseline "
                                                               "(null before it matured and was tested)")


class SliceRef(BaseModel):
    key: str
    value: str


class PerformanceView(BaseModel):
    """A model's (or a slice's) label-joined cohorts."""

    model_id: str
    task: str = Field(..., description="binary, multiclass or regression")
    threshold: float | None = Field(..., description="The decision threshold (binary tasks)")
    slice: SliceRef | None = Field(..., description="The slice shown (null: the whole model)")
    slice_values: dict[str, list[str]] = Field(..., description="Per slice feature, the values admitted")
    labels: dict[str, int] = Field(..., description="Label join counters (joined, duplicate, relabeled, "
                                                      "unknown, late, invalid)")
    cohorts: list[CohortView] = Field(..., description="Oldest first")


def parse_slice(text: str | None, cfg: ModelConfig) -> tuple[str, str] | None:
    """The (key, value) of the ``slice`` query parameter (None: the whole model).

    Raises
    ------
    ApiError
        422 naming ``slice`` when the text is not ``<key>:<value>`` with a configured key.
    """
    if text is None:
        return None
    parsed = parse_slice_label(text, cfg.slice_features)
    if parsed is None:
        keys = ", ".join(repr(k) for k in cfg.slice_features) or "none configured"
        raise ApiError(422, "invalid_request", f"slice: expected <key>:<value> with a non-empty value and "
                       f"<key> one of the model's slice_features ({keys}); got {text!r}", "slice")
    return parsed


@router.get(
    "/{model_id}/performance",
    summary="Label-joined cohorts: realized and estimated performance, maturity (whole model or a slice)",
    description="Cohorts oldest first, paged by `limit` and `offset` (or by time: the next page starts at "
                "`from` = the last `window_start` + 1). With `slice=<key>:<value>`, the cohorts of that "
                "slice (windows where it had predictions) and their slice evaluations.",
    responses={200: json_example(PERFORMANCE_EXAMPLE), 404: {"model": ErrorBody}, 409: {"model": ErrorBody},
               422: {"model": ErrorBody}},
    response_model=PerformanceView,
)
async def performance(
    model_id: ModelId,
    store: StoreDep,
    from_: Annotated[datetime | None, Query(alias="from", description="Cohort window start >=")] = None,
    to: Annotated[datetime | None, Query(description="Cohort window start <=")] = None,
    slice_: Annotated[str | None, Query(alias="slice", max_length=MAX_SLICE_PARAM, description=SLICE_HELP,
                                        openapi_examples={"slice": {"value": "country:DE"}})] = None,
    limit: Annotated[int, limit_query(MAX_COHORTS)] = 200,
    offset: Offset = 0,
) -> PerformanceView:
    await require_model(store, model_id)
    cfg = (await store.model_configs([model_id]))[model_id]
    if not isinstance(cfg, ModelConfig) or not cfg.joins_labels:
        raise ApiError(409, "labels_not_joined", f"model {model_id!r} is not a tier-1 model with a "
                       "performance configuration (POST /v1/models: tier 1, performance)", "model_id")
    lo = from_.replace(tzinfo=from_.tzinfo or UTC).timestamp() if from_ else 0
    hi = to.replace(tzinfo=to.tzinfo or UTC).timestamp() if to else math.inf
    if lo > hi:
        raise ApiError(422, "invalid_request", "from must not be after to", "from")
    chosen = parse_slice(slice_, cfg)
    sid = None if chosen is None else slice_id(*chosen)
    cohorts = CohortStore(store.r)
    perf, grid = cfg.performance, cfg.window_grid
    codec = codec_for(perf.task, perf.threshold)
    stats = await cohorts.stats(model_id)
    watermark = stats.get("watermark", -math.inf)
    starts = await cohorts.cohort_starts(model_id, lo, hi)
    if sid is not None:
        present = await cohorts.window_slices(model_id, starts)
        starts = [s for s in starts if sid in present[s]]
    page = starts[offset:offset + limit]
    if sid is None:
        evaluations = await cohorts.evaluations(model_id)
    else:
        evaluations = await cohorts.slice_evaluations(model_id, page, sid)
    out = []
    async for start, c in cohorts.iter_load(model_id, page, codec, sid):
        length = grid.window_at(start)[1]  # a local day may be 23 or 25 hours
        m = maturity(c.labeled, c.predictions, watermark - (start + length),
                     perf.expected_label_fraction, perf.label_horizon_seconds)
        out.append({
            "window_start": start, "window_end": start + length, "window_start_local": cfg.local_time(start),
            "predictions": c.predictions, "labeled": c.labeled,
            "maturity": {"mature": m.mature, "labeled_fraction": m.labeled_fraction, "reason": m.reason},
            "realized": realized_metrics(perf.task, c.metrics),
            "estimated": estimated_metrics(perf.task, c.metrics, c.confidence_sum, c.confidence_n),
            "evaluation": evaluations.get(start),
        })
    return PerformanceView(
        model_id=model_id, task=perf.task, threshold=perf.threshold if perf.task == "binary" else None,
        slice=None if chosen is None else SliceRef(key=chosen[0], value=chosen[1]),
        slice_values=await cohorts.admitted_values(model_id, cfg.slice_features),
        labels={k: v for k, v in stats.items() if k != "watermark"}, cohorts=out)
