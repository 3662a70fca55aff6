"""Cohort counters: the field -> count map a cohort is in Redis, and the binary cohort's form.

Counts are 64-bit integers (``HINCRBY``), sums floats (``HINCRBYFLOAT``). A
label's contribution is a set of increments; a relabel adds the new label's
and subtracts the old one's (:func:`minus`). Each task's fields:
:mod:`service.cohorts.codec`.
"""

from __future__ import annotations

import numpy as np

from detectors.performance.binary import EPS, BinaryCohort
from detectors.performance.grid import bin_index

_FLOATS = (("log_loss_sum", "ll"), ("log_loss_sq", "llq"), ("brier_sum", "br"),
           ("brier_sq", "brq"), ("score_sum", "sc"))
_HISTOGRAMS = (("pos", "pos"), ("neg", "neg"), ("predicted", "pred"))
_CONFUSION = ("tp", "fp", "tn", "fn")

Counters = dict[str, int | float]


def decode_fields(fields: dict[bytes | str, bytes | str]) -> dict[str, str]:
    """A Redis hash as read (bytes or str keys and values) with str keys and values."""
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in fields.items()}


def minus(add: Counters, sub: Counters) -> Counters:
    """The increments ``add - sub``, field by field, without the fields that cancel.

    Examples
    --------
    >>> minus({"tp": 1, "pos:3": 1}, {"tp": 1, "fn": 1})
    {'pos:3': 1, 'fn': -1}
    """
    out = dict(add)
    for k, v in sub.items():
        out[k] = out.get(k, 0) - v
    return {k: v for k, v in out.items() if v}


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
    for key, value in decode_fields(fields).items():
        prefix, _, index = key.partition(":")
        if index and prefix in hist:
            hist[prefix][int(index)] = int(value)
        elif key in _CONFUSION:
            setattr(c, key, int(value))
        elif key[:-1] in floats and key[-1] in "01":
            floats[key[:-1]][int(key[-1])] = float(value)
    return c


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
    return add if old is None else minus(add, example_counters(score, old, threshold))
