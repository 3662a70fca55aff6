"""Reference (baseline) profiles built from tabular data."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from detectors.config import DetectorConfig, alerting_only
from detectors.policy.learned import LearnedFloors, learn_floors
from detectors.result import TestResult
from detectors.suite import evaluate_window
from detectors.volume_shape import DailyShape
from sdk.batching import split_messages
from sdk.columns import RecordColumns
from sdk.record import PredictionRecord, RecordError, check_event_time, validate_record
from sdk.wire import encode_columns
from service.cohorts import Prediction, class_name, codec_for
from service.cohorts.codec import labelled_counters
from service.cohorts.counters import Counters
from service.registry import PerformanceConfig
from sketches.bins import SCORE_EDGES, EdgeSet, bin_templates, derive_edges
from sketches.columns import subset
from sketches.profile import WindowProfile
from sketches.window import WindowGrid, window_starts

REFERENCE_VERSION = "reference"


@dataclass(frozen=True)
class ReferenceColumns:
    """The columns of reference rows that are not features."""

    score: str | None = None
    label: str | None = None
    truth: str | None = None
    time: str | None = None


def reference_records(
    model_id: str,
    rows: Iterable[Mapping[str, Any]],
    score_column: str | None = None,
    label_column: str | None = None,
    truth_column: str | None = None,
    time_column: str | None = None,
) -> list[PredictionRecord]:
    """Validate rows (feature columns plus optional score, predicted-label,
    ground-truth and event-time columns; the ground truth and the time are no features).

    Raises
    ------
    RecordError
        With ``field`` = ``"rows[i].<field>"`` for the first bad row.
    """
    out = []
    for i, row in enumerate(rows):
        features = {k: v for k, v in row.items()
                    if k not in (score_column, label_column, truth_column, time_column)}
        data = {
            "model_id": model_id,
            "model_version": REFERENCE_VERSION,
            "prediction_id": str(i),
            "event_time": 0.0,
            "features": features,
            "score": row.get(score_column) if score_column else None,
            "predicted_label": row.get(label_column) if label_column else None,
        }
        try:
            out.append(validate_record(data))
        except RecordError as exc:
            raise RecordError(f"rows[{i}].{exc.field}", exc.message, exc.reason) from None
    return out


def check_encodable(cols: RecordColumns) -> None:
    """Refuse reference rows the record wire cannot carry (a string holding a lone
    surrogate, which no UTF-8 encoder takes): the profile built from them could not be
    stored, so the upload would fail after validation.

    Raises
    ------
    RecordError
        With ``field`` = ``"rows[i]"`` for the first such row.
    """
    split = split_messages(cols.model_id.encode(), cols, encode_columns, max(len(cols), 1), 2**62)
    if split.unencodable:
        at, error = split.unencodable[0]
        raise RecordError(f"rows[{at}]", f"cannot be encoded ({error})")


def _numbers(column: Any) -> np.ndarray:
    """The int and float values of a column (bools, strings and None left out), as float64."""
    if isinstance(column, np.ndarray) and column.dtype.kind in "fiu":
        return column.astype(np.float64)
    return np.array([v for v in column if type(v) is float or type(v) is int], dtype=np.float64)


def reference_edges(cols: RecordColumns) -> dict[str, np.ndarray]:
    """Per feature holding numbers (and the score), the bin edges derived from its raw values
    (:func:`sketches.bins.derive_edges`)."""
    out = {}
    columns = dict(cols.features)
    if cols.score is not None:
        columns[SCORE_EDGES] = cols.score
    for name, column in columns.items():
        edges = derive_edges(_numbers(column))
        if edges is not None:
            out[name] = edges
    return out


def build_reference(
    model_id: str,
    rows: Iterable[Mapping[str, Any]],
    score_column: str | None = None,
    label_column: str | None = None,
    truth_column: str | None = None,
    edges: EdgeSet | None = None,
    time_column: str | None = None,
) -> WindowProfile:
    """A reference profile (window start and length 0) of the rows.

    Its numeric features and score also count their values in fixed bins
    (:mod:`sketches.bins`): ``edges`` when given (rows added to an existing
    reference keep its edges), else edges derived from these rows, of which
    the profile is then the source.

    Raises
    ------
    RecordError
        Naming the first bad row and field.
    """
    cols = RecordColumns.from_records(model_id, reference_records(model_id, rows, score_column,
                                                                  label_column, truth_column,
                                                                  time_column))
    check_encodable(cols)
    bins = bin_templates(edges) if edges is not None else bin_templates(reference_edges(cols), source=True)
    profile = WindowProfile(model_id, 0, 0, bins=bins)
    profile.add_columns(cols)
    return profile


#: The latest event time a reference row may carry: 10000-01-01T00:00Z, Unix seconds.
MAX_REFERENCE_TIME = 253_402_300_800


def event_times(rows: Sequence[Mapping[str, Any]], time_column: str) -> np.ndarray:
    """The rows' event times (Unix seconds, float64, shape (n,)) from ``time_column``.

    Raises
    ------
    RecordError
        With ``field`` = ``"rows[i].<time_column>"`` for the first row whose time is
        missing, not a number (:func:`sdk.record.check_event_time`) or after the year 9999.
    """
    out = np.empty(len(rows), dtype=np.float64)
    for i, row in enumerate(rows):
        value = row.get(time_column)
        if value is None:
            raise RecordError(f"rows[{i}].{time_column}", "the event time is missing")
        try:
            out[i] = check_event_time(value)
        except RecordError as exc:
            message = exc.message.replace("a number or null", "a number")
            raise RecordError(f"rows[{i}].{time_column}", f"the event time {message}", exc.reason) from None
        if out[i] >= MAX_REFERENCE_TIME:
            raise RecordError(f"rows[{i}].{time_column}", "the event time must be before the year 10000")
    return out


def reference_shape(rows: Sequence[Mapping[str, Any]], time_column: str,
                    grid: WindowGrid) -> DailyShape | None:
    """The rows counted by local time of day in the zone of the model's windows ``grid``
    (:class:`detectors.volume_shape.DailyShape`; None without rows).

    Raises
    ------
    RecordError
        As :func:`event_times`.
    """
    return DailyShape.of_times(event_times(rows, time_column), grid.tz)


@dataclass(frozen=True)
class FloorLearning:
    """How :func:`learned_reference_floors` learns (``FLEETWATCH_LEARNED_FLOOR_*``)."""

    quantile: float = 0.99
    min_windows: int = 8
    max_windows: int = 300
    shuffles: int = 2
    seed: int = 0


def learned_reference_floors(
    model_id: str,
    rows: Sequence[Mapping[str, Any]],
    reference: WindowProfile,
    config: DetectorConfig,
    window_seconds: int,
    origin: int,
    columns: ReferenceColumns,
    how: FloorLearning = FloorLearning(),
) -> LearnedFloors:
    """What each feature of the reference moves window to window
    (:func:`detectors.policy.learned.learn_floors`), for the checks that may alert.

    The rows are split into the model's windows by ``columns.time`` (aligned as the
    aggregator aligns them; at most ``how.max_windows`` of them, a seeded sample,
    are tested); each window's profile, counted in the reference's bins, is tested
    against ``reference`` with ``config``'s alerting checks; so are ``how.shuffles``
    random partitions of the same rows into windows of the same sizes (seeded: the
    same rows learn the same floors).

    Raises
    ------
    RecordError
        Naming the first row whose event time is not a number.
    """
    times = event_times(rows, columns.time)
    starts = window_starts(times, window_seconds, origin)
    order = np.argsort(starts, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(starts[order])) + 1) if len(rows) else []
    if len(groups) < how.min_windows:  # nothing to test: the rule says why
        return learn_floors([[] for _ in groups], [], window_seconds, how.quantile, how.min_windows)
    rng = np.random.default_rng(how.seed)
    if len(groups) > how.max_windows:
        groups = [groups[i] for i in np.sort(rng.choice(len(groups), how.max_windows, replace=False))]
    used = np.concatenate(groups)
    cols = RecordColumns.from_records(model_id, reference_records(
        model_id, [rows[i] for i in used], columns.score, columns.label, columns.truth, columns.time))
    templates = bin_templates(reference.edge_set())
    checks = alerting_only(config)

    def tested(idx: np.ndarray) -> list[TestResult]:
        chunk = WindowProfile(model_id, 0, 0, bins=templates)
        chunk.add_columns(subset(cols, idx, [*cols.features, *cols.vectors]))
        return evaluate_window(chunk, reference, checks)

    sizes = np.cumsum([len(g) for g in groups])[:-1]
    chunks = [tested(g) for g in np.split(np.arange(len(used)), sizes)]
    shuffled = [[tested(g) for g in np.split(rng.permutation(len(used)), sizes)]
                for _ in range(how.shuffles)]
    return learn_floors(chunks, shuffled, window_seconds, how.quantile, how.min_windows)


def labelled_reference(
    rows: Iterable[Mapping[str, Any]],
    perf: PerformanceConfig,
    truth_column: str,
    score_column: str | None = None,
    label_column: str | None = None,
) -> Counters:
    """The cohort counters of a labelled reference (e.g. the validation set with its
    ground truth): the baseline of the label-joined checks, fixed before any live label.

    Per row: the prediction (``score_column`` for binary and regression models,
    ``label_column`` -- the predicted class -- for multiclass ones) and the true label
    (``truth_column``), as the joiner would have counted them.

    Raises
    ------
    RecordError
        Naming ``rows[i].<column>`` of the first row whose prediction or label does not
        fit the model's task.
    """
    codec = codec_for(perf.task, perf.threshold)
    column = label_column if perf.task == "multiclass" else score_column
    if column is None:
        raise RecordError("label_column" if perf.task == "multiclass" else "score_column",
                          f"a labelled reference of a {perf.task} model needs its predictions' column")
    preds, labels = [], []
    for i, row in enumerate(rows):
        truth = codec.label(row.get(truth_column))
        if truth is None:
            raise RecordError(f"rows[{i}].{truth_column}",
                              f"not a {perf.task} label: {row.get(truth_column)!r}")
        value = row.get(column)
        if perf.task == "multiclass":
            p = Prediction(str(i), None, 0, 0.0, class_name(value))
        else:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            p = Prediction(str(i), float(value) if ok else None, 0, 0.0)
        if not codec.accepts(p):
            raise RecordError(f"rows[{i}].{column}", f"not a {perf.task} prediction: {value!r}")
        preds.append(p)
        labels.append(truth)
    return labelled_counters(codec, preds, labels)


def read_csv_rows(path: str) -> list[dict[str, Any]]:
    """Rows of a CSV file; empty cells become missing values."""
    import pandas as pd

    df = pd.read_csv(path)
    return [
        {k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
        for r in df.to_dict(orient="records")
    ]
