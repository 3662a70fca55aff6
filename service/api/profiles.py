"""Profile endpoint: a model's window or rollup profiles in a time range, summarised."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from service.api.deps import StoreDep, config_in_force, require_model
from service.api.errors import ApiError, ErrorBody
from service.api.model_views import ProfilesView, WindowSummary
from service.api.params import ModelId, Offset, json_example, limit_query
from service.api.summary import window_summary
from service.profiles.keys import parse_member
from service.profiles.rollups import DAY, HOUR
from service.profiles.store import Store

router = APIRouter(prefix="/v1/models", tags=["models"])
MAX_WINDOWS = 1_000
GRANULARITY = {"window": None, "hour": HOUR, "day": DAY}


@router.get(
    "/{model_id}/profiles",
    summary="Profiles in a time range (versions merged), from windows or rollups",
    response_model=ProfilesView,
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
    store: StoreDep,
    from_: Annotated[
        datetime | None, Query(alias="from", description="Window start >= (ISO 8601 or Unix s)")
    ] = None,
    to: Annotated[datetime | None, Query(description="Window start <= (ISO 8601 or Unix s)")] = None,
    granularity: Annotated[Literal["auto", "window", "hour", "day"], Query(
        description="window: closed windows; hour / day: rollups; auto: the finest that holds "
                    "the range in at most `limit` profiles")] = "auto",
    limit: Annotated[int, limit_query(MAX_WINDOWS)] = 200,
    offset: Offset = 0,
) -> ProfilesView:
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
            windows.append(WindowSummary(**window_summary(merged),
                                         window_start_local=cfg.local_time(merged.window_start)))
    return ProfilesView(model_id=model_id, granularity=name, windows=windows)


async def _grouped(store: Store, model_id: str, lo: float, hi: float,
                   granularity: int | None) -> dict[tuple[int, int], list[str]]:
    """Index members in ``[lo, hi]`` by (start, length), in start order (versions together)."""
    out: dict[tuple[int, int], list[str]] = {}
    for m in await store.window_members(model_id, lo, hi, granularity):
        length, start, _v = parse_member(m)
        out.setdefault((start, length), []).append(m)
    return dict(sorted(out.items()))
