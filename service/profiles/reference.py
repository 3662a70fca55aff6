"""Reference (baseline) profiles built from tabular data."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from sdk.batching import split_messages
from sdk.columns import RecordColumns
from sdk.record import PredictionRecord, RecordError, validate_record
from sdk.wire import encode_columns
from service.cohorts import Prediction, class_name, codec_for
from service.cohorts.codec import labelled_counters
from service.cohorts.counters import Counters
from service.registry import PerformanceConfig
from sketches.bins import SCORE_EDGES, EdgeSet, bin_templates, derive_edges
from sketches.profile import WindowProfile

REFERENCE_VERSION = "reference"


def reference_records(
    model_id: str,
    rows: Iterable[Mapping[str, Any]],
    score_column: str | None = None,
    label_column: str | None = None,
    truth_column: str | None = None,
) -> list[PredictionRecord]:
    """Validate rows (feature columns plus optional score, predicted-label and
    ground-truth columns; the ground truth is no feature).

    Raises
    ------
    RecordError
        With ``field`` = ``"rows[i].<field>"`` for the first bad row.
    """
    out = []
    for i, row in enumerate(rows):
        features = {k: v for k, v in row.items() if k not in (score_column, label_column, truth_column)}
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
                                                                  label_column, truth_column))
    check_encodable(cols)
    bins = bin_templates(edges) if edges is not None else bin_templates(reference_edges(cols), source=True)
    profile = WindowProfile(model_id, 0, 0, bins=bins)
    profile.add_columns(cols)
    return profile


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
