"""Performance endpoint: label-joined cohorts with realized and estimated metrics and maturity."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from detectors.performance.estimate import estimate_cohort
from detectors.performance.maturity import maturity
from service.api.errors import ApiError, ErrorBody
from service.api.models import json_example, require_model, store_of
from service.api.params import ModelId, Offset, limit_query
from service.cohorts import CohortStore
from service.joiner import cohort_metrics

router = APIRouter(prefix="/v1/models", tags=["performance"])
MAX_COHORTS = 1_000

PERFORMANCE_EXAMPLE = {
    "model_id": "fraud-v3", "threshold": 0.5,
    "labels": {"joined": 48_210.0, "duplicate": 3.0, "relabeled": 0.0, "unknown": 0.0, "late": 12.0,
               "invalid": 0.0},
    "cohorts": [{
        "window_start": 1_700_006_400, "window_end": 1_700_006_700, "predictions": 1000, "labeled": 940,
        "maturity": {"mature": True, "labeled_fraction": 0.94, "reason": "labeled"},
        "realized": {"roc_auc": 0.91, "log_loss": 0.21, "brier_score": 0.05, "ece": 0.02, "precision": 0.62,
                     "recall": 0.55, "f1": 0.58, "accuracy": 0.95, "average_precision": 0.6,
                     "positive_rate": 0.04},
        "estimated": {"accuracy": 0.95, "precision": 0.6, "recall": 0.57, "f1": 0.58, "roc_auc": 0.9},
        "evaluation": None}]}


@router.get(
    "/{model_id}/performance",
    summary="Label-joined cohorts: realized and estimated (CBPE) performance, maturity",
    description="Cohorts oldest first, paged by `limit` and `offset` (or by time: the next page starts at "
                "`from` = the last `window_start` + 1).",
    responses={200: json_example(PERFORMANCE_EXAMPLE), 404: {"model": ErrorBody}, 409: {"model": ErrorBody},
               422: {"model": ErrorBody}},
)
async def performance(
    model_id: ModelId,
    request: Request,
    from_: Annotated[datetime | None, Query(alias="from", description="Cohort window start >=")] = None,
    to: Annotated[datetime | None, Query(description="Cohort window start <=")] = None,
    limit: Annotated[int, limit_query(MAX_COHORTS)] = 200,
    offset: Offset = 0,
) -> dict[str, Any]:
    store = store_of(request)
    await require_model(store, model_id)
    cfg = (await store.model_configs([model_id]))[model_id]
    if cfg is None or not cfg.joins_labels:
        raise ApiError(409, "labels_not_joined", f"model {model_id!r} is not a tier-1 model with a "
                       "performance configuration (POST /v1/models: tier 1, performance)", "model_id")
    lo = from_.replace(tzinfo=from_.tzinfo or UTC).timestamp() if from_ else 0
    hi = to.replace(tzinfo=to.tzinfo or UTC).timestamp() if to else math.inf
    if lo > hi:
        raise ApiError(422, "invalid_request", "from must not be after to", "from")
    cohorts = CohortStore(store.r)
    perf, length = cfg.performance, cfg.window_seconds
    stats = await cohorts.stats(model_id)
    watermark = stats.get("watermark", -math.inf)
    evaluations = await cohorts.evaluations(model_id)
    out = []
    for start in (await cohorts.cohort_starts(model_id, lo, hi))[offset:offset + limit]:
        c = await cohorts.cohort(model_id, start, perf.threshold)
        m = maturity(c.n, c.n_predictions, watermark - (start + length),
                     perf.expected_label_fraction, perf.label_horizon_seconds)
        estimate = estimate_cohort(c)
        out.append({
            "window_start": start, "window_end": start + length,
            "predictions": c.n_predictions, "labeled": c.n,
            "maturity": {"mature": m.mature, "labeled_fraction": m.labeled_fraction, "reason": m.reason},
            "realized": cohort_metrics(c),
            "estimated": {k: getattr(estimate, k).value
                          for k in ("accuracy", "precision", "recall", "f1", "roc_auc")},
            "evaluation": evaluations.get(start),
        })
    return {"model_id": model_id, "threshold": perf.threshold,
            "labels": {k: v for k, v in stats.items() if k != "watermark"}, "cohorts": out}
