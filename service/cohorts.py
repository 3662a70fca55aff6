"""Label-joined cohorts in Redis: joined predictions and mergeable counters per window and slice.

A cohort is one model's sampled predictions of one prediction window -- the
whole model's, or those of one *slice* (a value of one of the model's slice
keys). Redis holds it as a HASH of counters that ``HINCRBY`` /
``HINCRBYFLOAT`` update atomically, so any number of joiner replicas add to
it without coordination and a cohort is always the sum of its examples. Every
cohort has ``np`` (predictions) and ``nl`` (labeled predictions); the rest
depends on the model's task (``PerformanceConfig.task``), each a mergeable
accumulator of :mod:`detectors.performance`:

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

Counts are 64-bit integers (``HINCRBY``). A label's contribution is a set of
increments; a relabel adds the new label's and subtracts the old one's.

Slices: for each configured slice key, a prediction's value (its record's
``slices`` entry, else the feature of that name when it is a string, bool or
integer) gets a cohort of its own while fewer than ``max_slice_values``
values of the key are admitted; further values share the cohort ``__other__``
(as the capped slice sub-profiles of :mod:`sketches.slices`). Unlike a
profile's per-window cap, admission is per model and kept across windows, so
a value's cohorts are comparable with its baseline; within a batch the
heaviest values are admitted first, and a value unseen for
``slice_stale_seconds`` (event time) gives its place up to a new one.

Keys (hash-tagged by model):

====================================  ==============================================
``fw:{m}:pred:{prediction id}``        HASH ``s`` score / prediction or ``c``
                                       predicted class, ``w`` window start, ``t``
                                       event time, ``sl`` JSON slice ids, ``y``
                                       label once joined; expires after twice the
                                       label horizon
``fw:{m}:coh:{start}``                 HASH the whole model's cohort counters (above),
                                       kept for ``retention_hourly_seconds``
``fw:{m}:coh:{start}:{slice id}``      HASH a slice's cohort counters; a slice id is
                                       the JSON ``["<key>","<value>"]``
``fw:{m}:cohslices:{start}``           SET slice ids with a cohort in the window
``fw:{m}:cohorts``                     ZSET cohort window starts
``fw:{m}:cohstate``                    HASH window start -> JSON evaluation (matured
                                       whole-model cohorts)
``fw:{m}:slicestate:{start}``          HASH slice id -> JSON evaluation (matured
                                       slice cohorts)
``fw:{m}:slicepending``                ZSET window starts with slice cohorts not
                                       judged yet
``fw:{m}:slicevals:{key}``             ZSET admitted values of a slice key, by the
                                       event time they were last seen
``fw:{m}:labelstats``                  HASH joined, duplicate, relabeled, unknown,
                                       late, invalid, watermark (max prediction event
                                       time)
``fw:{m}:parked``                      ZSET labels whose prediction has not been read
                                       yet, by label time
====================================  ==============================================
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import redis.asyncio as aioredis

from detectors.performance.binary import EPS, BinaryCohort
from detectors.performance.grid import bin_index
from detectors.performance.loghist import LogHistogram
from detectors.performance.multiclass import MulticlassCohort
from detectors.performance.regression import RegressionCohort
from sketches.slices import OTHER

_FLOATS = (("log_loss_sum", "ll"), ("log_loss_sq", "llq"), ("brier_sum", "br"),
           ("brier_sq", "brq"), ("score_sum", "sc"))
_HISTOGRAMS = (("pos", "pos"), ("neg", "neg"), ("predicted", "pred"))
_CONFUSION = ("tp", "fp", "tn", "fn")
STATS = ("joined", "duplicate", "relabeled", "unknown", "late", "invalid")
ERROR_ACCURACY = 0.01
"""Relative accuracy of a regression cohort's error quantiles (LogHistogram buckets)."""

Counters = dict[str, int | float]


# -- labels ---------------------------------------------------------------------
def binary_label(value: Any) -> int | None:
    """0/1 from a bool, 0/1 number or "0"/"1"/"true"/"false"; None otherwise.

    Examples
    --------
    >>> binary_label(True), binary_label(0.0), binary_label("true"), binary_label(2)
    (1, 0, 1, None)
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.lower() in ("0", "1", "true", "false"):
        return int(value.lower() in ("1", "true"))
    return None


def class_name(value: Any) -> str | None:
    """A multiclass label or predicted class as the class name it is counted under.

    Booleans are ``"true"`` / ``"false"``, integers and integral floats their
    decimal form (so a label ``2`` and a class-probability key ``"2"`` are one
    class), non-empty strings themselves; anything else is not a class (None).

    Examples
    --------
    >>> class_name(True), class_name(2), class_name(2.0), class_name("cat"), class_name(2.5)
    ('true', '2', '2', 'cat', None)
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str) and value:
        return value
    return None


def regression_target(value: Any) -> float | None:
    """A regression label: a finite number that is not a bool (None otherwise).

    Examples
    --------
    >>> regression_target(3), regression_target(2.5), regression_target(True), regression_target("1")
    (3.0, 2.5, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


# -- slices ---------------------------------------------------------------------
def slice_id(key: str, value: str) -> str:
    """The id of a slice in Redis: the compact JSON ``["<key>","<value>"]``.

    Examples
    --------
    >>> slice_id("country", "DE")
    '["country","DE"]'
    """
    return json.dumps([key, value], separators=(",", ":"), ensure_ascii=False)


def parse_slice_id(sid: str | bytes) -> tuple[str, str]:
    """Inverse of :func:`slice_id`."""
    key, value = json.loads(sid)
    return key, value


def slice_label(key: str, value: str) -> str:
    """A slice as people write it (API ``slice=``, alert check names): ``"<key>:<value>"``.

    Examples
    --------
    >>> slice_label("country", "DE")
    'country:DE'
    """
    return f"{key}:{value}"


def parse_slice_label(text: str, keys: Sequence[str]) -> tuple[str, str] | None:
    """Split ``"<key>:<value>"`` at the configured key it starts with (the longest), so
    keys and values may themselves contain ``:``; None when no key matches or the
    value is empty.

    Examples
    --------
    >>> parse_slice_label("country:DE", ["country"]), parse_slice_label("a:b:c", ["a", "a:b"])
    (('country', 'DE'), ('a:b', 'c'))
    >>> parse_slice_label("country", ["country"]) is None
    True
    """
    for key in sorted(keys, key=len, reverse=True):
        if text.startswith(key + ":") and len(text) > len(key) + 1:
            return key, text[len(key) + 1:]
    return None


def slice_value(value: Any) -> str | None:
    """A feature value as a slice value: strings as they are, booleans ``"true"`` /
    ``"false"``, integers in decimal; None (no slice) for anything else -- a
    continuous value is not a segment.

    Examples
    --------
    >>> slice_value("DE"), slice_value(False), slice_value(3), slice_value(0.5)
    ('DE', 'false', '3', None)
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int):
        return str(value) if value != "" else None
    return None


# -- predictions ----------------------------------------------------------------
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


# -- the three cohort codecs ------------------------------------------------------
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


def _decode(fields: dict[bytes | str, bytes | str]) -> dict[str, str]:
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in fields.items()}


def to_counters(c: BinaryCohort) -> Counters:
    """The non-zero counters of a binary cohort (its Redis form).

    Examples
    --------
    >>> c = BinaryCohort(); c.add([0.25], [1])
    >>> sorted(k for k in to_counters(c) if not k.startswith(("ll", "br", "sc")))
    ['fn', 'pos:1509']
    """
    out: Counters = {}
    for attr, prefix in _HISTOGRAMS:
        counts = getattr(c, attr)
        for k in np.flatnonzero(counts).tolist():
            out[f"{prefix}:{k}"] = int(counts[k])
    for name in _CONFUSION:
        if getattr(c, name):
            out[name] = getattr(c, name)
    for attr, prefix in _FLOATS:
        for label, v in enumerate(getattr(c, attr).tolist()):
            if v:
                out[f"{prefix}{label}"] = v
    return out


def from_counters(fields: dict[bytes | str, bytes | str], threshold: float) -> BinaryCohort:
    """A binary cohort from its Redis counters (other fields are ignored).

    Examples
    --------
    >>> c = BinaryCohort(); c.add([0.25, 0.75], [1, 0])
    >>> from_counters({k: str(v) for k, v in to_counters(c).items()}, 0.5).roc_auc().value
    0.0
    """
    c = BinaryCohort(threshold)
    hist = {prefix: getattr(c, attr) for attr, prefix in _HISTOGRAMS}
    floats = {prefix: getattr(c, attr) for attr, prefix in _FLOATS}
    for key, value in _decode(fields).items():
        prefix, _, index = key.partition(":")
        if index and prefix in hist:
            hist[prefix][int(index)] = int(value)
        elif key in _CONFUSION:
            setattr(c, key, int(value))
        elif key[:-1] in floats and key[-1] in "01":
            floats[key[:-1]][int(key[-1])] = float(value)
    return c


def _minus(add: Counters, sub: Counters) -> Counters:
    out = dict(add)
    for k, v in sub.items():
        out[k] = out.get(k, 0) - v
    return {k: v for k, v in out.items() if v}


def example_counters(score: float, label: int, threshold: float) -> Counters:
    """The counters one labeled example adds to a binary cohort: ``to_counters`` of a
    cohort holding only it, without building one (the arithmetic of ``BinaryCohort.add``).

    Examples
    --------
    >>> c = BinaryCohort(0.5); c.add([0.75], [0])
    >>> example_counters(0.75, 0, 0.5) == to_counters(c)
    True
    """
    k = int(bin_index(np.array([score]))[0])
    hit, y = score >= threshold, bool(label)
    p = min(max(score, EPS), 1.0 - EPS)
    loss = float(-np.log(p)) if y else float(-np.log1p(-p))
    d = score - y
    brier = d * d
    out: Counters = {f"{'pos' if y else 'neg'}:{k}": 1,
                     ("tp" if y else "fp") if hit else ("fn" if y else "tn"): 1}
    for prefix, v in (("ll", loss), ("llq", loss * loss), ("br", brier), ("brq", brier * brier),
                      ("sc", score)):
        if v:
            out[f"{prefix}{int(y)}"] = v
    return out


def delta(score: float, new: int, old: int | None, threshold: float) -> Counters:
    """Binary counter increments that replace label ``old`` (None: unlabeled) by ``new``
    for one prediction with ``score``."""
    add = example_counters(score, new, threshold)
    return add if old is None else _minus(add, example_counters(score, old, threshold))


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


def _arg(v: int | float) -> str:
    """A counter increment for the Lua scripts: floats always carry '.' or 'e'."""
    return repr(float(v)) if isinstance(v, float) else str(int(v))


# -- Lua ------------------------------------------------------------------------
_INCR = """
local function incr(key, f, v)
  if string.find(v, '[.eE]') then redis.call('HINCRBYFLOAT', key, f, v)
  else redis.call('HINCRBY', key, f, v) end
end
"""

# Store a prediction once. KEYS: prediction, cohort starts ZSET, the window's slice SET,
# windows with slices not judged yet ZSET, then the cohorts it counts in (whole model
# first). ARGV: ttl, cohort ttl, window start, nfields, field/value pairs, ninc,
# field/increment pairs, then one slice id per slice cohort key.
_PREDICT = _INCR + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local i = 5
for _ = 1, tonumber(ARGV[4]) do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]); i = i + 2 end
redis.call('EXPIRE', KEYS[1], ARGV[1])
local ninc = tonumber(ARGV[i]); i = i + 1
for k = 5, #KEYS do
  for j = i, i + 2 * ninc - 1, 2 do incr(KEYS[k], ARGV[j], ARGV[j + 1]) end
  redis.call('EXPIRE', KEYS[k], ARGV[2])
end
i = i + 2 * ninc
if i <= #ARGV then
  for j = i, #ARGV do redis.call('SADD', KEYS[3], ARGV[j]) end
  redis.call('EXPIRE', KEYS[3], ARGV[2])
  redis.call('ZADD', KEYS[4], ARGV[3], ARGV[3])
end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[3])
return 1
"""

# A window whose slice cohorts are all judged leaves the pending set (KEYS: pending
# ZSET, the window's slice SET, its slice evaluations HASH; ARGV: window start).
_SETTLE_SLICES = """
if redis.call('SCARD', KEYS[2]) <= redis.call('HLEN', KEYS[3]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
"""

# Join a label (ARGV: label read before, new label, then field/delta pairs applied to
# every cohort KEYS[3..]) if the prediction's label is still the one read (else -2:
# read again). 1 joined, 0 duplicate, -1 no such prediction.
_JOIN = _INCR + """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local cur = redis.call('HGET', KEYS[1], 'y') or ''
if cur ~= ARGV[1] then return -2 end
if cur == ARGV[2] then redis.call('HINCRBY', KEYS[2], 'duplicate', 1) return 0 end
redis.call('HSET', KEYS[1], 'y', ARGV[2])
for k = 3, #KEYS do
  for i = 3, #ARGV, 2 do incr(KEYS[k], ARGV[i], ARGV[i + 1]) end
end
if cur == '' then redis.call('HINCRBY', KEYS[2], 'joined', 1)
else redis.call('HINCRBY', KEYS[2], 'relabeled', 1) end
return 1
"""

# Admit slice values of one key (ARGV: cap, stale-before time, then value / last-seen
# pairs, heaviest first): 1 per value admitted (it keeps its own cohort), 0 capped.
_ADMIT = """
local cap, stale = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 2 do
  local v, t = ARGV[i], tonumber(ARGV[i + 1])
  local seen = redis.call('ZSCORE', KEYS[1], v)
  if seen then
    if tonumber(seen) < t then redis.call('ZADD', KEYS[1], t, v) end
    out[#out + 1] = 1
  elseif redis.call('ZCARD', KEYS[1]) < cap then
    redis.call('ZADD', KEYS[1], t, v)
    out[#out + 1] = 1
  else
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    if tonumber(oldest[2]) < stale then
      redis.call('ZREM', KEYS[1], oldest[1])
      redis.call('ZADD', KEYS[1], t, v)
      out[#out + 1] = 1
    else
      out[#out + 1] = 0
    end
  end
end
return out
"""


def pred_key(m: str, prediction_id: str) -> str:
    return f"fw:{{{m}}}:pred:{prediction_id}"


def cohort_key(m: str, start: int, sid: str | None = None) -> str:
    return f"fw:{{{m}}}:coh:{start}" if sid is None else f"fw:{{{m}}}:coh:{start}:{sid}"


def stats_key(m: str) -> str:
    return f"fw:{{{m}}}:labelstats"


def window_slices_key(m: str, start: int) -> str:
    return f"fw:{{{m}}}:cohslices:{start}"


def slice_state_key(m: str, start: int) -> str:
    return f"fw:{{{m}}}:slicestate:{start}"


def slices_pending_key(m: str) -> str:
    return f"fw:{{{m}}}:slicepending"


def slice_values_key(m: str, key: str) -> str:
    return f"fw:{{{m}}}:slicevals:{key}"


class CohortStore:
    """Joined predictions and cohort counters over a ``redis.asyncio.Redis`` client."""

    def __init__(self, r: aioredis.Redis) -> None:
        self.r = r
        self._predict = r.register_script(_PREDICT)
        self._join = r.register_script(_JOIN)
        self._admit = r.register_script(_ADMIT)
        self._settle_slices = r.register_script(_SETTLE_SLICES)

    # -- predictions ------------------------------------------------------------
    async def admit_slices(self, model_id: str, preds: Sequence[Prediction], max_values: int,
                           stale_seconds: float) -> dict[tuple[str, str], str]:
        """The cohort value of each (key, value) of ``preds``: the value itself while
        the key has room (or already admitted it), else ``__other__``."""
        by_key: dict[str, Counter[str]] = {}
        last: dict[tuple[str, str], float] = {}
        for p in preds:
            for key, value in p.slices:
                by_key.setdefault(key, Counter())[value] += 1
                last[key, value] = max(last.get((key, value), -math.inf), p.event_time)
        out: dict[tuple[str, str], str] = {}
        for key, counts in by_key.items():
            values = sorted(counts, key=lambda v: (-counts[v], v))
            newest = max(last[key, v] for v in values)
            args: list[Any] = [max_values, repr(max(newest - stale_seconds, -1e300))]
            for v in values:
                args += [v, repr(last[key, v])]
            admitted = await self._admit(keys=[slice_values_key(model_id, key)], args=args)
            for v, ok in zip(values, admitted, strict=True):
                out[key, v] = v if int(ok) else OTHER
        return out

    async def put_predictions(self, model_id: str, predictions: Iterable[Prediction], ttl: int,
                              cohort_ttl: int, codec: Codec | None = None, *,
                              max_slice_values: int = 16, slice_stale_seconds: float = math.inf) -> int:
        """Store predictions not stored yet; count them into their window's cohort and
        their slices' cohorts. Returns how many were new (a redelivered prediction is
        not counted twice). ``codec`` defaults to binary at threshold 0.5."""
        codec = codec or BinaryCodec()
        preds = [p for p in predictions if codec.accepts(p)]
        if not preds:
            return 0
        cap = await self.admit_slices(model_id, preds, max_slice_values, slice_stale_seconds) \
            if any(p.slices for p in preds) else {}
        counters = codec.prediction_counters(preds)
        async with self.r.pipeline(transaction=False) as pipe:
            for p, inc in zip(preds, counters, strict=True):
                sids = sorted({slice_id(k, cap[k, v]) for k, v in p.slices})
                fields = {**codec.prediction_fields(p), "w": str(p.window_start), "t": repr(p.event_time)}
                if sids:
                    fields["sl"] = json.dumps(sids)
                args: list[Any] = [ttl, cohort_ttl, p.window_start, len(fields)]
                for f, v in fields.items():
                    args += [f, v]
                args.append(len(inc))
                for f, v in inc.items():
                    args += [f, _arg(v)]
                args += sids
                await self._predict(
                    keys=[pred_key(model_id, p.prediction_id), f"fw:{{{model_id}}}:cohorts",
                          window_slices_key(model_id, p.window_start), slices_pending_key(model_id),
                          cohort_key(model_id, p.window_start),
                          *(cohort_key(model_id, p.window_start, s) for s in sids)],
                    args=args, client=pipe)
            pipe.hget(stats_key(model_id), "watermark")
            *created, watermark = await pipe.execute()
        top = max(p.event_time for p in preds)
        if watermark is None or float(watermark) < top:
            await self.r.hset(stats_key(model_id), "watermark", repr(top))
        return sum(int(c) for c in created)

    # -- labels -----------------------------------------------------------------
    async def join(self, model_id: str, prediction_id: str, label: str | int, label_time: float,
                   codec: Codec | float, horizon: float) -> str:
        """Join one label: :meth:`join_many` of one. A float ``codec`` is a binary
        model's threshold; an int label is normalised by the codec (0/1)."""
        if not isinstance(codec, BinaryCodec | MulticlassCodec | RegressionCodec):
            codec = BinaryCodec(float(codec))
        new = label if isinstance(label, str) else codec.label(label)
        return (await self.join_many(model_id, [(prediction_id, new, label_time)], codec, horizon))[0]

    async def join_many(self, model_id: str, labels: Sequence[tuple[str, str, float]], codec: Codec,
                        horizon: float) -> list[str]:
        """Join labels ``(prediction id, label as Codec.label returns it, label time)`` in
        order, a few round trips for the lot; per label the outcome: joined, relabeled,
        duplicate, late, invalid (a regression error beyond float64), or missing (no such
        prediction stored: the caller parks the label or counts it unknown). Late and
        invalid labels are counted here.

        Each label is a compare-and-set on the label its prediction held when read, so
        a label that another one (in this batch or another replica) changed meanwhile
        is read again: the last label applied wins.
        """
        names = ["y", "t", "w", "sl", *codec.stored]
        outcomes: list[str | None] = [None] * len(labels)
        pending = list(range(len(labels)))
        for _ in range(8):
            if not pending:
                return outcomes  # type: ignore[return-value]
            async with self.r.pipeline(transaction=False) as pipe:
                for i in pending:
                    pipe.hmget(pred_key(model_id, labels[i][0]), names)
                reads = await pipe.execute()
            calls: list[tuple[int, str | None]] = []
            counted: Counter[str] = Counter()
            async with self.r.pipeline(transaction=False) as pipe:
                for i, values in zip(pending, reads, strict=True):
                    pid, new, label_time = labels[i]
                    raw = dict(zip(names, values, strict=True))
                    if raw["w"] is None or any(raw[f] is None for f in codec.stored):
                        outcomes[i] = "missing"
                        continue
                    if label_time - float(raw["t"]) > horizon:
                        outcomes[i] = "late"
                        counted["late"] += 1
                        continue
                    stored = {f: raw[f].decode() for f in codec.stored}
                    previous = None if raw["y"] is None else raw["y"].decode()
                    try:
                        inc = codec.label_counters(stored, new)
                        if previous is not None:
                            inc = _minus(inc, codec.label_counters(stored, previous))
                    except ValueError:
                        outcomes[i] = "invalid"
                        counted["invalid"] += 1
                        continue
                    if previous is None:
                        inc["nl"] = 1
                    args: list[Any] = ["" if previous is None else previous, new]
                    for f, v in inc.items():
                        args += [f, _arg(v)]
                    w = int(raw["w"])
                    sids = json.loads(raw["sl"]) if raw["sl"] else []
                    await self._join(keys=[pred_key(model_id, pid), stats_key(model_id),
                                           cohort_key(model_id, w),
                                           *(cohort_key(model_id, w, s) for s in sids)],
                                     args=args, client=pipe)
                    calls.append((i, previous))
                for outcome, n in counted.items():
                    pipe.hincrby(stats_key(model_id), outcome, n)
                got = await pipe.execute()
            pending = []
            for (i, previous), g in zip(calls, got, strict=False):
                if g == -2:  # changed since read: read again
                    pending.append(i)
                else:
                    outcomes[i] = {1: "joined" if previous is None else "relabeled", 0: "duplicate",
                                   -1: "missing"}[g]
        if pending:
            raise RuntimeError(f"label for {labels[pending[0]][0]!r} kept changing under us")
        return outcomes  # type: ignore[return-value]

    async def park(self, model_id: str, prediction_id: str, label: str | int, label_time: float) -> None:
        """Keep a label whose prediction has not been read yet."""
        await self.r.zadd(f"fw:{{{model_id}}}:parked",
                          {json.dumps([prediction_id, label, label_time]): label_time})

    async def unpark(self, model_id: str, upto: float) -> list[tuple[str, str | int, float]]:
        """Take the parked labels with label time <= ``upto``."""
        key = f"fw:{{{model_id}}}:parked"
        async with self.r.pipeline(transaction=True) as p:
            p.zrangebyscore(key, "-inf", upto)
            p.zremrangebyscore(key, "-inf", upto)
            raw, _n = await p.execute()
        return [tuple(json.loads(m)) for m in raw]

    async def count(self, model_id: str, outcome: str, n: int = 1) -> None:
        await self.r.hincrby(stats_key(model_id), outcome, n)

    async def stats(self, model_id: str) -> dict[str, float]:
        raw = await self.r.hgetall(stats_key(model_id))
        out = {k.decode(): float(v) for k, v in raw.items()}
        return {**dict.fromkeys(STATS, 0.0), **out}

    # -- cohorts ----------------------------------------------------------------
    async def cohort_starts(self, model_id: str, lo: float, hi: float) -> list[int]:
        return [int(float(m)) for m in await self.r.zrangebyscore(f"fw:{{{model_id}}}:cohorts", lo, hi)]

    async def cohort(self, model_id: str, start: int, threshold: float) -> BinaryCohort:
        """A binary model's whole-model cohort of one window."""
        return from_counters(await self.r.hgetall(cohort_key(model_id, start)), threshold)

    async def load(self, model_id: str, start: int, codec: Codec, sid: str | None = None) -> LoadedCohort:
        """One cohort (the whole model's, or slice ``sid``'s) of one window."""
        return codec.load(_decode(await self.r.hgetall(cohort_key(model_id, start, sid))))

    async def load_many(self, model_id: str, starts: Sequence[int], codec: Codec,
                        sid: str | None = None) -> list[LoadedCohort]:
        """:meth:`load` of several windows in one round trip."""
        if not starts:
            return []
        async with self.r.pipeline(transaction=False) as pipe:
            for s in starts:
                pipe.hgetall(cohort_key(model_id, s, sid))
            raw = await pipe.execute()
        return [codec.load(_decode(f)) for f in raw]

    async def iter_load(self, model_id: str, starts: Sequence[int], codec: Codec, sid: str | None = None,
                        chunk: int = 32) -> AsyncIterator[tuple[int, LoadedCohort]]:
        """:meth:`load` of many windows, ``chunk`` per round trip, holding one chunk at a
        time (a binary cohort's hash has up to 15,000 fields)."""
        for i in range(0, len(starts), chunk):
            part = starts[i:i + chunk]
            for s, c in zip(part, await self.load_many(model_id, part, codec, sid), strict=True):
                yield s, c

    async def sizes(self, model_id: str, keys: Sequence[tuple[int, str | None]]) -> list[tuple[int, int]]:
        """(predictions, labeled) of each (window start, slice id or None) cohort, cheaply."""
        if not keys:
            return []
        async with self.r.pipeline(transaction=False) as pipe:
            for start, sid in keys:
                pipe.hmget(cohort_key(model_id, start, sid), ["np", "nl"])
            raw = await pipe.execute()
        return [(int(a or 0), int(b or 0)) for a, b in raw]

    async def windows_pending_slices(self, model_id: str) -> list[int]:
        """Window starts with slice cohorts not judged yet."""
        return [int(float(m)) for m in await self.r.zrange(slices_pending_key(model_id), 0, -1)]

    async def settle_slices(self, model_id: str, start: int) -> bool:
        """Take the window off the pending set if all its slice cohorts are judged."""
        return bool(await self._settle_slices(
            keys=[slices_pending_key(model_id), window_slices_key(model_id, start),
                  slice_state_key(model_id, start)], args=[start]))

    async def window_slices(self, model_id: str, starts: Sequence[int]) -> dict[int, set[str]]:
        """Slice ids with a cohort in each window."""
        if not starts:
            return {}
        async with self.r.pipeline(transaction=False) as pipe:
            for s in starts:
                pipe.smembers(window_slices_key(model_id, s))
            raw = await pipe.execute()
        return {s: {m.decode() for m in members} for s, members in zip(starts, raw, strict=True)}

    async def admitted_values(self, model_id: str, keys: Sequence[str]) -> dict[str, list[str]]:
        """The values of each slice key that have cohorts of their own (besides ``__other__``)."""
        if not keys:
            return {}
        async with self.r.pipeline(transaction=False) as pipe:
            for k in keys:
                pipe.zrange(slice_values_key(model_id, k), 0, -1)
            raw = await pipe.execute()
        return {k: sorted(v.decode() for v in vals) for k, vals in zip(keys, raw, strict=True)}

    async def judged_slices(self, model_id: str, starts: Sequence[int]) -> dict[int, set[str]]:
        """Slice ids judged (evaluated) in each window."""
        if not starts:
            return {}
        async with self.r.pipeline(transaction=False) as pipe:
            for s in starts:
                pipe.hkeys(slice_state_key(model_id, s))
            raw = await pipe.execute()
        return {s: {m.decode() for m in members} for s, members in zip(starts, raw, strict=True)}

    async def slice_evaluations(self, model_id: str, starts: Sequence[int],
                                sid: str) -> dict[int, dict[str, Any]]:
        """Slice ``sid``'s evaluation in each window where it was judged."""
        if not starts:
            return {}
        async with self.r.pipeline(transaction=False) as pipe:
            for s in starts:
                pipe.hget(slice_state_key(model_id, s), sid)
            raw = await pipe.execute()
        return {s: json.loads(v) for s, v in zip(starts, raw, strict=True) if v is not None}

    async def put_slice_evaluation(self, model_id: str, start: int, sid: str, evaluation: dict[str, Any],
                                   ttl: int) -> None:
        key = slice_state_key(model_id, start)
        async with self.r.pipeline(transaction=False) as pipe:
            pipe.hset(key, sid, json.dumps(evaluation))
            pipe.expire(key, ttl)
            await pipe.execute()

    async def evaluations(self, model_id: str) -> dict[int, dict[str, Any]]:
        raw = await self.r.hgetall(f"fw:{{{model_id}}}:cohstate")
        return {int(k): json.loads(v) for k, v in raw.items()}

    async def put_evaluation(self, model_id: str, start: int, evaluation: dict[str, Any]) -> None:
        await self.r.hset(f"fw:{{{model_id}}}:cohstate", str(start), json.dumps(evaluation))
