"""The answers of the model resource (``/v1/models``, one model, its reference, its
profiles and its status), as typed models so the OpenAPI schema documents them, and
:func:`model_view`, the model as ``GET /v1/models/{id}`` shows it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from detectors.policy.learned import LearnedFloors
from detectors.volume_shape import DailyShape
from service.profiles.evaluation import model_detector_config
from service.profiles.store import Store
from service.registry import ModelConfig, traffic_warnings
from service.settings import Settings
from service.stored import Unreadable
from sketches.window import WindowGrid


class BinEdges(BaseModel):
    version: str = Field(..., description="Hash of the edges: windows counted in other edges are not "
                                          "compared bin by bin")
    edges: list[float] = Field(..., description="Inner bin edges, ascending (bins: len(edges) + 1)")


class ReferenceSummary(BaseModel):
    """What a reference profile holds (summaries as in ``GET /v1/models/{id}/profiles``)."""

    model_id: str
    count: int = Field(..., description="Rows the reference was built from")
    features: dict[str, dict[str, Any]] = Field(
        ..., description="Per feature: kind, null rate, quantiles or top categories (docs/profiles.md)")
    score: dict[str, Any] = Field(..., description="Summary of the score column (count 0 without one)")
    predictions: dict[str, int] = Field(
        ..., description="Top predicted labels (empty without a label column)")
    edges: dict[str, BinEdges] = Field(
        ..., description="Per numeric feature ('__score__': the score), the bin edges derived from the "
                         "reference at upload, which every window counts in (empty: no bins, the tests use "
                         "the t-digests)")
    daily_shape: DailyShapeView | None = Field(
        None, description="The daily shape of the rows' event times (null: uploaded without a time_column)")


class DailyShapeView(BaseModel):
    """The daily shape of the reference's event times (docs/detectors.md, the volume test's history)."""

    rows: int = Field(..., description="Reference rows with an event time it was counted from")
    zone: str | None = Field(..., description="The time zone of its hours (null: UTC)")
    hourly: list[float] | None = Field(
        ..., description="The fitted curve's rate in each local hour 0-23 relative to the day's mean "
                         "(null: no curve, see missing)")
    missing: str | None = Field(
        ..., description="Why the volume test does not use it: no curve fitted, or counted in another "
                         "time zone than the model's windows (null: it is used)")

    @classmethod
    def of(cls, shape: DailyShape | None, grid: WindowGrid) -> DailyShapeView | None:
        """The shape as the model with windows ``grid`` uses it (None: none)."""
        if shape is None:
            return None
        fit = shape.fit
        return cls(rows=shape.rows, zone=shape.zone, missing=shape.unusable(getattr(grid.tz, "key", None)),
                   hourly=None if fit is None else [round(r, 4) for r in fit.hourly()])


class ReferenceBrief(BaseModel):
    count: int = Field(..., description="Rows the reference was built from")
    features: list[str] = Field(..., description="Features of the reference ('' is the score)")


class BaselineView(BaseModel):
    configured: str = Field(..., description="The detector configuration's baseline kind: auto, reference, "
                                             "trailing or seasonal")
    last_used: str | None = Field(None, description="The baseline the last evaluated window was compared "
                                                    "with (null before the first evaluation)")


class LearnedFloorView(BaseModel):
    floor: float = Field(..., description="The learned floor: movement minus noise, at least 0")
    movement: float = Field(..., description="The quantile of |effect| over the reference's windows")
    noise: float = Field(..., description="The same quantile over shuffled windows of the same sizes "
                                          "(sampling noise)")
    windows: int = Field(..., description="Reference windows whose test decided")


class LearnedFloorsView(BaseModel):
    """The floors learned from the reference (docs/detectors.md, learned floors)."""

    source: str = Field(..., description="reference: its rows split into the model's windows by event time")
    window_seconds: int = Field(..., description="Window length learned for; windows of another length "
                                                 "use the configured floors")
    quantile: float = Field(..., description="FLEETWATCH_LEARNED_FLOOR_QUANTILE when learned")
    windows: int = Field(..., description="Windows the reference split into")
    note: str | None = Field(None, description="Why nothing was learned")
    floors: dict[str, dict[str, LearnedFloorView]] = Field(
        ..., description="Feature ('__score__': the score) -> check -> learned floor. A test's floor is "
                         "max(configured, learned) when the reference is its baseline")


def learned_floors_view(floors: LearnedFloors) -> LearnedFloorsView:
    return LearnedFloorsView(
        source=floors.source, window_seconds=floors.window_seconds, quantile=floors.quantile,
        windows=floors.chunks, note=floors.note,
        floors={f: {c: LearnedFloorView(floor=v.floor, movement=v.movement, noise=v.noise, windows=v.chunks)
                    for c, v in checks.items()} for f, checks in floors.floors.items()})


class FloorsView(BaseModel):
    configured: dict[str, float] = Field(..., description="Effect floor per check in force for the model "
                                                          "(service defaults and its detector configuration; "
                                                          "per-feature overrides in its detector-config)")
    learned: LearnedFloorsView | None = Field(..., description="Floors learned from the reference (null: "
                                                               "none; upload it with a time_column)")


class ModelView(BaseModel):
    """A model as registered: configuration, lineage, baseline and reference."""

    model_id: str
    registered: bool = Field(..., description="Has a stored configuration (false: created implicitly by "
                                              "its records, running on the defaults)")
    config: ModelConfig | None = Field(..., description="The configuration in force (defaults when not "
                                                        "registered; null when the stored one is unreadable)")
    config_error: str | None = Field(None, description="Why the stored configuration does not parse")
    lineage: dict[str, list[str]] = Field(
        ..., description="Upstream source -> the declared features it feeds (features without a source "
                         "are left out)")
    baseline: BaselineView
    floors: FloorsView
    reference: ReferenceBrief | None = Field(..., description="The reference profile, null without one")
    warnings: list[str] = Field(default_factory=list, description="What the configuration will not do "
                                "well, e.g. windows expected to hold fewer records than a test needs")


class ModelListed(BaseModel):
    """A model of ``GET /v1/models``."""

    model_id: str
    config: ModelConfig | None = Field(..., description="The stored configuration (the defaults for a "
                                                        "model created by its records; null when unreadable)")
    config_error: str | None = Field(None, description="Why the stored configuration does not parse")
    has_reference: bool
    late_records: int = Field(..., description="Records dead-lettered as late")
    future_records: int = Field(..., description="Records dead-lettered for an event time too far ahead")


class ModelRegistered(BaseModel):
    """The answer of ``POST /v1/models`` and ``PUT /v1/models/{id}``: the configuration stored."""

    model_id: str
    config: ModelConfig
    warnings: list[str] = Field(default_factory=list, description="What the configuration will not do "
                                "well, e.g. windows expected to hold fewer records than a test needs")


class ReferenceUploaded(BaseModel):
    """The answer of ``POST /v1/models/{id}/reference``: the reference stored."""

    model_id: str
    count: int = Field(..., description="Rows of the reference (merged ones included)")
    features: list[str] = Field(..., description="Features of the reference ('' is the score)")
    learned_floors: LearnedFloorsView | None = Field(
        None, description="Floors learned from the rows' windows (null without a time_column)")
    daily_shape: DailyShapeView | None = Field(
        None, description="The daily shape of the rows' event times (null without a time_column)")


class WindowSummary(BaseModel):
    """One profile of ``GET /v1/models/{id}/profiles`` (its versions merged; docs/profiles.md)."""

    window_start: int
    window_end: int
    window_start_local: str = Field(..., description="window_start in the model's time zone (ISO 8601)")
    count: int
    insufficient_data: bool = Field(..., description="The window holds no record")
    versions: dict[str, int] = Field(..., description="Records per model version")
    features: dict[str, dict[str, Any]] = Field(
        ..., description="Per feature: kind, null rate, quantiles or top categories (docs/profiles.md)")
    vectors: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per vector feature: dimension, projection dimension, count, "
                                          "null rate, norms and the norm of its mean vector (docs/sdk.md)")
    score: dict[str, Any] = Field(..., description="Summary of the score (count 0 without one)")
    predictions: dict[str, int] = Field(default_factory=dict, description="Top predicted labels")


class ProfilesView(BaseModel):
    model_id: str
    granularity: str = Field(..., description="window, hour or day: what the profiles are")
    windows: list[WindowSummary] = Field(..., description="Oldest first")


class DeletedView(BaseModel):
    model_id: str
    deleted_keys: int = Field(..., description="Redis keys removed (every key of the model)")
    deleted: list[str] = Field(..., description="What was deleted")
    kept: list[str] = Field(..., description="What was not deleted, and why")


DELETED = ["configuration", "detector configuration", "reference profile, its bin edges and learned floors",
           "window and rollup profiles and their indexes", "stored test results and cached baselines",
           "alert-policy series and pending windows", "label cohorts, joined predictions and label counters",
           "per-model status counters", "membership of the model list"]
KEPT = ["alerts and incidents (fleet-wide history; resolve open ones first)",
        "dead-letter counts (late, future and by reason) in the aggregators' partition checkpoints "
        "(read back if the model is registered again)",
        "records in flight (open windows, the topics' backlog): they create the model again as an "
        "implicit model when they are aggregated",
        "dead-lettered records in the dead-letter topic (expire with the topic's retention)"]


class RecordCounts(BaseModel):
    in_evaluated_windows: int = Field(..., description="Records of the windows the detector evaluated "
                                                       "(each window counted once)")
    late: int = Field(..., description="Records dead-lettered as late (their window had closed)")
    future: int = Field(..., description="Records dead-lettered because their event time was more than "
                                         "FLEETWATCH_MAX_FUTURE_SECONDS ahead of the aggregator's clock")
    dead_lettered: dict[str, int] = Field(
        ..., description="Records of the model dead-lettered by the aggregators, by reason (the `reason` "
                         "header of the dead letter and label of fleetwatch_records_dead_lettered_total: "
                         "late, future_event_time, not_finite, wrong_type, key_mismatch, undecodable, ...); "
                         "reasons with none left out. A message is counted for the model its envelope "
                         "names (its key when the envelope does not decode) if that model exists")
    rejected: dict[str, int] = Field(
        default_factory=dict,
        description="Records of the model refused by POST /v1/ingest (answered 4xx, never produced), by "
                    "reason: the refused record's (not_finite, wrong_type, missing_field, too_large, "
                    "out_of_range, invalid_id, unencodable) and in_refused_batch for the other records of "
                    "the batch it refused (a batch is all or nothing); reasons with none left out. "
                    "Counted for the model a record names, if that model exists")


class WindowCounts(BaseModel):
    open: int = Field(..., description="Windows open in the aggregators, as of their last checkpoint")
    closed: int = Field(..., description="Closed windows still stored (within FLEETWATCH_RETENTION_WINDOW_"
                                         "SECONDS)")
    pending_policy: int = Field(..., description="Closed windows the alert policy has not applied yet")
    evaluated: int = Field(..., description="Windows tested and applied by the alert policy")
    skipped: dict[str, int] = Field(..., description="Windows not tested, by reason: no_baseline, "
                                                     "no_profile, error, policy_error")
    abandoned: int = Field(..., description="Windows the alert policy stopped waiting for: still pending a "
                                            "day after a later window was evaluated (never alerted on)")


class LastWindow(BaseModel):
    window_start: int
    window_end: int
    window_start_local: str = Field(..., description="window_start in the model's time zone (ISO 8601 "
                                                     "with its UTC offset then; UTC without a zone)")
    version: str
    baseline: str = Field(..., description="What the window was compared with")
    evaluated_at: float = Field(..., description="Unix seconds")


class FdrApplied(BaseModel):
    level: float = Field(..., description="The BH level the online FDR gate gave the last gated window")
    window_start: int
    tests: int = Field(..., description="Alerting tests the gate saw in that window")
    discoveries: int = Field(..., description="Tests it let through")


class LabelCounts(BaseModel):
    joined: int
    duplicate: int
    relabeled: int
    unknown: int = Field(..., description="Labels of predictions never seen (or not sampled)")
    late: int = Field(..., description="Labels later than the label horizon")
    invalid: int
    pending: int = Field(..., description="Labels waiting for their prediction to be read")


class ModelStatus(BaseModel):
    """What the service counted for one model."""

    model_id: str
    records: RecordCounts
    windows: WindowCounts
    last_evaluated: LastWindow | None
    fdr: FdrApplied | None = Field(..., description="The FDR gate on the last window it gated (null "
                                                     "before the first)")
    baseline: BaselineView
    floors: FloorsView
    labels: LabelCounts | None = Field(..., description="Label join counters (null unless the model is "
                                                        "tier 1 with a performance configuration)")


def config_warnings(config: ModelConfig, settings: Settings) -> list[str]:
    """The warnings registration answers (:func:`service.registry.traffic_warnings`)."""
    return traffic_warnings(config, settings.pool_min_records, settings.pool_max_windows)


async def model_view(store: Store, settings: Settings, model_id: str) -> ModelView:
    """A registered model as ``GET /v1/models/{id}`` answers it."""
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
