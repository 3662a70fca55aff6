"""The per-task cohort codecs: how a task's predictions and labels become cohort counters.

Every cohort has ``np`` (predictions) and ``nl`` (labeled predictions); the
rest depends on the model's task (``PerformanceConfig.task``), each a
mergeable accumulator of :mod:`detectors.performance`:

binary (``BinaryCohort``)
    ``pred:{k}`` predictions whose score falls in grid bin k (labeled or
    not), ``pos:{k}`` / ``neg:{k}`` labeled positives / negatives in bin k,
    ``tp fp tn fn`` confusion counts at the model's threshold, float sums per
    label ``ll0 ll1`` (log loss), ``llq`` (its square), ``br brq`` (Brier),
    ``sc`` (score).
multiclass (``MulticlassCohort``)
    ``cm:["<true>","<predicted>"]`` confusion cells (labeled),
    ``pc:<class>`` predictions per predicted class, ``cf`` / ``cfn`` the sum
    and count of top-class probabilities (for the label-free estimate).
regression (``RegressionCohort``)
    ``n nape nz`` labeled / with y != 0 / with y == 0; float sums ``se``
    (error e = prediction - target), ``sa`` (|e|), ``ss`` (e^2), ``s4``
    (e^4), ``sape sapeq`` (|e| / |y| and its square); ``h:{i}`` / ``h0``
    counts of |e| in the buckets of a
    :class:`~detectors.performance.loghist.LogHistogram` (the error
    quantiles; a histogram of counts, because a relabel must *subtract* its
    old error, which no t-digest can).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from detectors.performance.binary import BinaryCohort
from detectors.performance.grid import bin_index
from detectors.performance.loghist import LogHistogram
from detectors.performance.multiclass import MulticlassCohort
from detectors.performance.regression import RegressionCohort
from service.cohorts.counters import Counters, delta, from_counters
from service.cohorts.labels import binary_label, class_name, regression_target

ERROR_ACCURACY = 0.01
"""Relative accuracy of a regression cohort's error quantiles (LogHistogram buckets)."""


@dataclass(frozen=True)
class Prediction:
    """One sampled prediction to store for the join.

    ``score`` is the binary score or the regression prediction;
    ``predicted_class`` / ``confidence`` (top-class probability, may be None)
    are the multiclass prediction; ``slices`` are (slice key, value) pairs of
    the model's configured slice keys, before the value cap.
    """

    prediction_id: str
    score: float | None
    window_start: int
    event_time: float
    predicted_class: str | None = None
    confidence: float | None = None
    slices: tuple[tuple[str, str], ...] = field(default_factory=tuple)


@dataclass
class LoadedCohort:
    """A cohort read from Redis: its metric accumulator and prediction-side counts.

    Attributes
    ----------
    metrics : BinaryCohort, MulticlassCohort or RegressionCohort
    predictions : int
        Predictions of the cohort (labeled or not).
    confidence_sum, confidence_n : float, int
        Multiclass: sum and count of top-class probabilities.
    """

    metrics: Any
    predictions: int = 0
    confidence_sum: float = 0.0
    confidence_n: int = 0

    @property
    def labeled(self) -> int:
        return self.metrics.n

    def merge(self, other: LoadedCohort) -> None:
        self.metrics.merge(other.metrics)
        self.predictions += other.predictions
        self.confidence_sum += other.confidence_sum
        self.confidence_n += other.confidence_n


class Codec(Protocol):
    """How one task's predictions and labels become cohort counters."""

    task: str
    stored: tuple[str, ...]  # prediction-hash fields the label deltas need

    def accepts(self, p: Prediction) -> bool: ...
    def label(self, value: Any) -> str | None: ...
    def prediction_fields(self, p: Prediction) -> dict[str, str]: ...
    def prediction_counters(self, preds: Sequence[Prediction]) -> list[Counters]: ...
    def label_counters(self, stored: dict[str, str], label: str) -> Counters: ...
    def empty(self) -> LoadedCohort: ...
    def load(self, fields: dict[str, str]) -> LoadedCohort: ...


class BinaryCodec:
    """Binary classifier: ``score`` = P(positive) in [0, 1], labels 0/1."""

    task = "binary"
    stored = ("s",)

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold

    def accepts(self, p: Prediction) -> bool:
        return p.score is not None and 0.0 <= p.score <= 1.0

    def label(self, value: Any) -> str | None:
        y = binary_label(value)
        return None if y is None else str(y)

    def prediction_fields(self, p: Prediction) -> dict[str, str]:
        return {"s": repr(float(p.score))}

    def prediction_counters(self, preds: Sequence[Prediction]) -> list[Counters]:
        bins = bin_index(np.array([p.score for p in preds], dtype=np.float64)).tolist()
        return [{f"pred:{k}": 1, "np": 1} for k in bins]

    def label_counters(self, stored: dict[str, str], label: str) -> Counters:
        return delta(float(stored["s"]), int(label), None, self.threshold)

    def empty(self) -> LoadedCohort:
        return LoadedCohort(BinaryCohort(self.threshold))

    def load(self, fields: dict[str, str]) -> LoadedCohort:
        c = from_counters(fields, self.threshold)
        return LoadedCohort(c, c.n_predictions)


class MulticlassCodec:
    """Multiclass classifier: the predicted class against the true class."""

    task = "multiclass"
    stored = ("c",)

    def accepts(self, p: Prediction) -> bool:
        return p.predicted_class is not None

    def label(self, value: Any) -> str | None:
        return class_name(value)

    def prediction_fields(self, p: Prediction) -> dict[str, str]:
        return {"c": p.predicted_class}

    def prediction_counters(self, preds: Sequence[Prediction]) -> list[Counters]:
        out = []
        for p in preds:
            c: Counters = {f"pc:{p.predicted_class}": 1, "np": 1}
            if p.confidence is not None:
                c["cf"] = float(p.confidence)
                c["cfn"] = 1
            out.append(c)
        return out

    def label_counters(self, stored: dict[str, str], label: str) -> Counters:
        return {"cm:" + json.dumps([label, stored["c"]], separators=(",", ":"), ensure_ascii=False): 1}

    def empty(self) -> LoadedCohort:
        return LoadedCohort(MulticlassCohort())

    def load(self, fields: dict[str, str]) -> LoadedCohort:
        classes: dict[str, int] = {}
        cells = []
        out = LoadedCohort(MulticlassCohort())
        for key, value in fields.items():
            if key.startswith("cm:"):
                count = int(value)
                if count:
                    t, p = json.loads(key[3:])
                    i, j = classes.setdefault(t, len(classes)), classes.setdefault(p, len(classes))
                    cells.append([i, j, count])
        out.metrics = MulticlassCohort.from_dict({"classes": list(classes), "cells": cells})
        out.predictions = int(fields.get("np", 0))
        out.confidence_sum = float(fields.get("cf", 0.0))
        out.confidence_n = int(fields.get("cfn", 0))
        return out


_REG_INTS = {"n": "n", "nape": "n_ape", "nz": "n_zero_target"}
_REG_FLOATS = {"se": "sum_error", "sa": "sum_abs", "ss": "sum_sq", "s4": "sum_fourth",
               "sape": "sum_ape", "sapeq": "sum_ape_sq"}


class RegressionCodec:
    """Regression model: ``score`` is the prediction, labels are numbers."""

    task = "regression"
    stored = ("s",)

    def __init__(self, relative_accuracy: float = ERROR_ACCURACY) -> None:
        self._hist = LogHistogram(relative_accuracy)

    def accepts(self, p: Prediction) -> bool:
        return p.score is not None and math.isfinite(p.score)

    def label(self, value: Any) -> str | None:
        y = regression_target(value)
        return None if y is None else repr(y)

    def prediction_fields(self, p: Prediction) -> dict[str, str]:
        return {"s": repr(float(p.score))}

    def prediction_counters(self, preds: Sequence[Prediction]) -> list[Counters]:
        return [{"np": 1} for _ in preds]

    def label_counters(self, stored: dict[str, str], label: str) -> Counters:
        """The error terms of one example (ValueError when they overflow float64)."""
        y = float(label)
        e = float(stored["s"]) - y
        a = abs(e)
        out: Counters = {"n": 1, "se": e, "sa": a, "ss": a * a, "s4": (a * a) ** 2}
        if y != 0:
            r = a / abs(y)
            out.update(nape=1, sape=r, sapeq=r * r)
        else:
            out["nz"] = 1
        if not all(math.isfinite(v) for v in out.values()):
            raise ValueError("regression error terms overflow float64")
        i = self._hist.index(a)
        out["h0" if i is None else f"h:{i}"] = 1
        return out

    def empty(self) -> LoadedCohort:
        return LoadedCohort(RegressionCohort(LogHistogram(self._hist.relative_accuracy)))

    def load(self, fields: dict[str, str]) -> LoadedCohort:
        out = self.empty()
        c, h = out.metrics, out.metrics.abs_errors
        for key, value in fields.items():
            if key in _REG_INTS:
                setattr(c, _REG_INTS[key], int(value))
            elif key in _REG_FLOATS:
                setattr(c, _REG_FLOATS[key], float(value))
            elif key == "h0":
                h.add_count(None, int(value))
            elif key.startswith("h:"):
                h.add_count(int(key[2:]), int(value))
        out.predictions = int(fields.get("np", 0))
        return out


def codec_for(task: str, threshold: float = 0.5) -> Codec:
    """The codec of a ``PerformanceConfig.task``.

    Raises
    ------
    ValueError
        On an unknown task.
    """
    if task == "binary":
        return BinaryCodec(threshold)
    if task == "multiclass":
        return MulticlassCodec()
    if task == "regression":
        return RegressionCodec()
    raise ValueError(f"unknown task {task!r}")


def labelled_counters(codec: Codec, preds: Sequence[Prediction], labels: Sequence[str]) -> Counters:
    """The counters of one cohort holding every prediction of ``preds`` labeled with the
    matching entry of ``labels`` (as :meth:`Codec.label` returns it): what joining each
    label to its stored prediction would have added (a labelled reference).

    Raises
    ------
    ValueError
        When ``preds`` and ``labels`` differ in length.

    Examples
    --------
    >>> codec = BinaryCodec(0.5)
    >>> preds = [Prediction(str(i), s, 0, 0.0) for i, s in enumerate([0.9, 0.2, 0.7])]
    >>> cohort = codec.load({k: repr(v) for k, v in labelled_counters(codec, preds, ["1", "0", "0"]).items()})
    >>> cohort.predictions, cohort.labeled, cohort.metrics.accuracy().value
    (3, 3, 0.6666666666666666)
    """
    if len(preds) != len(labels):
        raise ValueError("one label per prediction")
    out: Counters = {}
    for p, counters, label in zip(preds, codec.prediction_counters(preds), labels, strict=True):
        for part in (counters, codec.label_counters(codec.prediction_fields(p), label), {"nl": 1}):
            for k, v in part.items():
                out[k] = out.get(k, 0) + v
    return out
