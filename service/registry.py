"""A model's registration: owner, tier, declared features with lineage, alert policy, routing."""

from __future__ import annotations

import functools
import math
import zoneinfo
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints, ValidationInfo, field_validator

from detectors.policy.persistence import PersistenceConfig
from detectors.strict import StrictModel
from sdk.record import MAX_FEATURES, MAX_ID_LENGTH, RecordError, check_model_id
from sdk.registry import FEATURE_TYPES
from sdk.vectors import MAX_VECTOR_DIM, MIN_VECTOR_DIM
from sketches.slices import MAX_SLICE_VALUES
from sketches.window import DAY, HOUR, ISO_WEEK_ORIGIN, WindowGrid

Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH)]
Label = Annotated[str, StringConstraints(min_length=1, max_length=128)]
VectorDim = Annotated[int, Field(ge=MIN_VECTOR_DIM, le=MAX_VECTOR_DIM, strict=True)]
MAX_VECTOR_FEATURES = 64


def valid_model_id(value: str) -> str:
    """:func:`sdk.record.check_model_id` as a pydantic validator (the one model id rule).

    Raises
    ------
    ValueError
        What is wrong with the id.
    """
    try:
        return check_model_id(value)
    except RecordError as exc:
        raise ValueError(exc.message) from None


#: A model id in a body: 1 to 256 printable characters, no ``/`` or ``\``, not ``.`` or ``..``.
ModelName = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH),
                      AfterValidator(valid_model_id)]


#: Files of a tz database directory that are not IANA zones (links to the host's own zone
#: and the POSIX rules template): refused, so a model's windows never depend on the host.
NOT_ZONES = frozenset({"localtime", "posixrules"})


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones()) - NOT_ZONES


@functools.cache
def time_zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA time zone ``name`` (e.g. ``Europe/Berlin``), from the system's tz database
    or the ``tzdata`` package.

    Raises
    ------
    ValueError
        If ``name`` is not an IANA zone name (``localtime``, file paths and the like included).
    """
    if name not in _zone_names():
        raise ValueError(f"unknown time zone {name!r}: an IANA zone name is expected, e.g. "
                         f"Europe/Berlin, America/New_York or UTC")
    return zoneinfo.ZoneInfo(name)


class FeatureDeclaration(StrictModel):
    """A feature's declared type and lineage."""

    type: Literal[FEATURE_TYPES] = Field(..., description="numeric, categorical or boolean")
    source: str | None = Field(None, min_length=1, max_length=256,
                               description="Upstream source the feature comes from (lineage)")

    model_config = {"extra": "forbid"}


class PerformanceConfig(StrictModel):
    """Label-joined performance monitoring (tier-1 models only) of a binary classifier,
    a multiclass classifier or a regression model (``task``)."""

    task: Literal["binary", "multiclass", "regression"] = Field(
        "binary", description="binary: `score` is P(positive), labels 0/1; multiclass: the predicted class "
                              "is `predicted_label` (else the arg-max of `class_probabilities`), labels are "
                              "classes; regression: `score` is the prediction, labels are numbers")
    threshold: float = Field(0.5, ge=0, le=1, description="Decision threshold: positive when score >= it")
    label_horizon_seconds: int = Field(
        30 * 86_400, ge=60, le=90 * 86_400,
        description="Labels arrive at most this long after the prediction (default 30 days: clicks "
                    "and chargebacks alike; a cohort matures as soon as expected_label_fraction of "
                    "its labels are in, so a long horizon delays only cohorts whose labels never "
                    "come; predictions are kept this long plus a day: docs/labels.md)")
    expected_label_fraction: float = Field(
        0.9, gt=0, le=1, description="Share of predictions that eventually get a label (maturity)")
    sample_rate: float = Field(
        1.0, gt=0, le=1, description="Share of predictions kept for the join, by hash of prediction_id")
    baseline_seconds: int = Field(
        7 * 86_400, ge=3_600, le=366 * 86_400,
        description="Matured cohorts of this trailing period are the baseline")
    baseline: Literal["auto", "trailing"] = Field(
        "auto", description="auto: the labelled reference when one was uploaded (POST "
                            "/v1/models/{id}/reference with truth_column), else the trailing "
                            "cohorts; trailing: always the trailing cohorts")
    auc_floor: float = Field(0.02, ge=0, le=1, description="AUC drop tolerated under the null")
    log_loss_floor: float = Field(0.05, ge=0, description="Log-loss increase tolerated under the null")
    accuracy_floor: float = Field(
        0.02, ge=0, le=1, description="Multiclass: accuracy drop tolerated under the null")
    mae_floor: float | None = Field(
        None, ge=0, description="Regression: MAE increase tolerated under the null, in target units "
                                "(default: mae_relative_floor times the baseline MAE)")
    mae_relative_floor: float = Field(
        0.1, ge=0, description="Regression, when mae_floor is unset: tolerated MAE increase as a share "
                               "of the baseline MAE")
    slice_min_labeled: int = Field(
        200, ge=1, le=10**9,
        description="Slice regressions: labeled predictions a slice's cohort and its baseline each need "
                    "before the slice is tested")
    slice_min_per_class: int = Field(
        30, ge=0, le=10**9,
        description="Slice regressions of a binary model: labeled positives and negatives a slice's cohort "
                    "and its baseline each need")

    model_config = {"extra": "forbid"}


class ModelConfig(StrictModel):
    """Per-model settings, stored as JSON."""

    window_seconds: int = Field(300, ge=1, le=31 * 86_400, description="Window length, seconds")
    expected_records_per_day: float | None = Field(
        None, ge=0, allow_inf_nan=False,
        description="The traffic the model expects (records a day, after SDK sampling): registration "
                    "warns when a window would hold fewer records than a test needs (docs/api.md, "
                    "choosing a window)")
    owner: str | None = Field(None, max_length=256, description="Owning team")
    tier: int = Field(2, ge=1, le=3, description="1: business critical, 2: standard, 3: best effort")
    features: dict[Name, FeatureDeclaration] = Field(
        default_factory=dict, max_length=MAX_FEATURES,
        description="Declared features: type and upstream source (lineage)")
    vector_features: dict[Name, VectorDim] = Field(
        default_factory=dict, max_length=MAX_VECTOR_FEATURES,
        description="Vector (embedding) features and their dimension (2 to 4096): a vector of another "
                    "length is dropped from its record (counted as vector_dimension); an undeclared vector "
                    "feature's dimension is fixed by the first vector of its window (docs/sdk.md, vectors)")
    persistence: PersistenceConfig = Field(default_factory=PersistenceConfig,
                                           description="k-of-m persistence and auto-resolve")
    routing: dict[Label, Label] = Field(default_factory=dict, max_length=32,
                                        description="Labels receivers route on (team, channel, ...)")
    slice_features: list[Name] = Field(
        default_factory=list, max_length=16,
        description="Features (or slice keys) profiled per value as well: sub-profiles per slice")
    max_slice_values: int = Field(MAX_SLICE_VALUES, ge=1, le=1_000,
                                  description="Slice values kept per slice key; the rest go to __other__")
    performance: PerformanceConfig | None = Field(
        None, description="Label-joined performance checks (run for tier-1 models only)")
    window_alignment: Literal["epoch", "iso_week"] = Field(
        "epoch", description="Origin of the tumbling windows: epoch: 1970-01-01T00:00Z, a Thursday (7-day "
                             "windows start on Thursdays 00:00 UTC); iso_week: Monday 1970-01-05T00:00Z "
                             "(7-day windows are ISO weeks, Monday 00:00 UTC)")
    window_timezone: str | None = Field(
        None, min_length=1, max_length=64,
        description="IANA time zone (e.g. Europe/Berlin) whose calendar the model follows: windows of "
                    "whole days (window_seconds a multiple of 86400) start at local midnight, so a window "
                    "is 23 h on the day clocks spring forward and 25 h on the day they fall back (with "
                    "iso_week, 7-day windows start on local Mondays); windows dividing an hour tile each "
                    "local day from its midnight, roll up into local days, and their seasonal baseline is "
                    "the same local hour of the same weekday. Other lengths are refused with a zone. "
                    "Default: UTC alignment from the origin of window_alignment")
    backfill: bool = Field(
        False, description="Backfilling or replaying history: open windows close after "
                           "FLEETWATCH_BACKFILL_IDLE_SECONDS without records (once everything sent has "
                           "been read) instead of FLEETWATCH_IDLE_CLOSE_SECONDS")

    @field_validator("window_timezone")
    @classmethod
    def _day_windows_in_zone(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        time_zone(value)
        seconds = info.data.get("window_seconds")
        if seconds is not None and seconds % DAY and HOUR % seconds:
            raise ValueError(f"windows in a time zone are whole local days (window_seconds a multiple of "
                             f"86400) or divide an hour (e.g. 300, 3600), so that every local day is a whole "
                             f"number of windows; window_seconds is {seconds}")
        return value

    @property
    def window_origin(self) -> int:
        """Unix time (s) the model's windows are aligned to (see ``window_alignment``)."""
        return ISO_WEEK_ORIGIN if self.window_alignment == "iso_week" else 0

    @property
    def window_grid(self) -> WindowGrid:
        """How the model's event times are cut into windows (:class:`sketches.window.WindowGrid`):
        its length and origin, in its time zone when it has one."""
        tz = None if self.window_timezone is None else time_zone(self.window_timezone)
        return WindowGrid(self.window_seconds, self.window_origin, tz)

    def local_time(self, t: float) -> str:
        """Unix time ``t`` (s) as ISO 8601 in the model's time zone, with its UTC offset then
        (UTC for a model without one), e.g. ``2024-03-31T00:00:00+01:00``."""
        return self.window_grid.local(t).isoformat()

    @property
    def joins_labels(self) -> bool:
        """Are this model's labels joined (tier 1 with a performance configuration)?"""
        return self.tier == 1 and self.performance is not None

    def unjoined_performance(self) -> str | None:
        """Why a ``performance`` section of this configuration would not join labels (the
        API refuses it: 422), or None."""
        if self.performance is not None and self.tier != 1:
            return (f"performance: label-joined checks run for tier-1 models only; this model is "
                    f"tier {self.tier}, so its labels would not be joined (register it with tier 1, "
                    f"or drop performance)")
        return None

    def source_of(self, feature: str) -> str | None:
        """The declared upstream source of ``feature`` (None when undeclared)."""
        decl = self.features.get(feature)
        return None if decl is None else decl.source


def traffic_warnings(config: ModelConfig, min_records: int, pool_windows: int) -> list[str]:
    """What registration warns about a model's expected traffic: windows holding fewer
    records than a test needs (``min_records``), which are then tested together with up
    to ``pool_windows`` preceding windows, or cannot be tested at all.

    Examples
    --------
    >>> traffic_warnings(ModelConfig(window_seconds=86_400, expected_records_per_day=5), 30, 14)[0][:62]
    'expected 5 records per window (5 a day, 86400 s windows), fewe'
    >>> traffic_warnings(ModelConfig(window_seconds=3_600, expected_records_per_day=2_400), 30, 14)
    []
    """
    per_day = config.expected_records_per_day
    if per_day is None:
        return []
    seconds = config.window_seconds
    per_window = per_day * seconds / 86_400
    if per_window >= min_records:
        return []
    needed = min(31 * 86_400, math.ceil(min_records / per_day * 86_400)) if per_day > 0 else None
    head = (f"expected {per_window:.3g} records per window ({per_day:g} a day, {seconds} s windows), "
            f"fewer than the {min_records} a test needs")
    pick = "" if needed is None else f"; a window of at least {needed} s holds them"
    if per_window * (pool_windows + 1) >= min_records:
        return [f"{head}: each window is tested together with the windows before it (up to "
                f"{pool_windows}) until it holds {min_records}, so a change is seen over "
                f"{math.ceil(min_records / per_window)} windows{pick}"]
    return [f"{head}, even pooled with {pool_windows} preceding windows: its tests will answer "
            f"insufficient_data{pick}"]

