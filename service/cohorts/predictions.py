"""Which predictions of a decoded batch the joiner keeps, as the model's task reads them, and
for how long (pure: no I/O)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk.columns import RecordColumns
from sdk.sampling import sample_point
from service.cohorts.codec import Prediction
from service.cohorts.labels import class_name
from service.cohorts.slices import slice_value
from service.registry import ModelConfig
from sketches.window import MAX_CALENDAR_TIME

#: How long after the label horizon a stored prediction is kept, so that a label later than
#: the horizon is counted ``late`` (visible per model) rather than ``unknown``.
LATE_GRACE_SECONDS = 86_400



def prediction_ttl(horizon: int, window_seconds: int) -> int:
    """Seconds a joined prediction is kept: its window, the label horizon and a day's grace.

    Examples
    --------
    >>> prediction_ttl(30 * 86_400, 300) / 86_400
    31.00347222222222
    """
    return horizon + window_seconds + LATE_GRACE_SECONDS


def _multiclass_prediction(label: Any, probabilities: dict[str, float] | None
                           ) -> tuple[str | None, float | None]:
    """(predicted class, its probability) from the predicted label, else the arg-max class."""
    predicted = class_name(label) if label is not None else None
    if probabilities:
        if predicted is None:
            predicted = max(sorted(probabilities), key=probabilities.__getitem__)
        return predicted, probabilities.get(predicted)
    return predicted, None


def predictions_of(cols: RecordColumns, cfg: ModelConfig) -> list[Prediction]:
    """The sampled predictions of one decoded batch, as the model's task reads them."""
    perf = cfg.performance
    n = len(cols)
    t_all = np.asarray(cols.event_time, dtype=np.float64)
    placed = t_all <= MAX_CALENDAR_TIME  # later ones are future records (the aggregator's dead letters)
    starts = cfg.window_grid.assign(np.where(placed, t_all, 0.0))[0].tolist()  # as the aggregator's
    score = cols.score or [None] * n
    labels = cols.predicted_label or [None] * n
    probs = cols.class_probabilities or [None] * n
    slice_cols = []
    for key in cfg.slice_features:
        if key in cols.slices:
            slice_cols.append((key, cols.slices[key], True))
        elif key in cols.features:
            slice_cols.append((key, cols.features[key], False))
    out = []
    for i, (pid, t) in enumerate(zip(cols.prediction_id, cols.event_time, strict=True)):
        if sample_point(pid) >= perf.sample_rate or not placed[i]:
            continue
        predicted, confidence = (_multiclass_prediction(labels[i], probs[i]) if perf.task == "multiclass"
                                 else (None, None))
        slices = tuple((key, v) for key, col, raw in slice_cols
                       if (v := (col[i] if raw else slice_value(col[i]))) is not None)
        s = score[i]
        out.append(Prediction(pid, None if s is None else float(s), starts[i], float(t),
                              predicted, confidence, slices))
    return out
