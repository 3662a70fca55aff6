"""How each incident corrupts a model's traffic: thinned volume, a shifted world, corrupted
records, a moved logit, inverted labels. Pure numpy."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from service.sim.fleet import (
    Batch,
    ModelSpec,
)
from service.sim.incidents import (
    BROKEN_FEATURE,
    CATEGORY_FLOOD,
    CATEGORY_RENAME,
    CONCEPT_DRIFT,
    COVARIATE_SHIFT,
    FLOOD_CATEGORY,
    LINEAGE_BREAK,
    RENAME_SUFFIX,
    SCORE_DRIFT,
    UNIT_CHANGE,
    VOLUME_DROP,
    Incident,
    top_categories,
)
from service.sim.magnitudes import shift_values


def _for(incidents: Iterable[Incident], model_id: str, lo: float, hi: float,
         kinds: Iterable[str]) -> list[Incident]:
    kinds = set(kinds)
    return [i for i in incidents if i.kind in kinds and model_id in i.models and i.overlaps(lo, hi)]


def _span(batch: Batch) -> tuple[float, float]:
    if not batch.n:
        return 0.0, 0.0
    return float(batch.event_times[0]), float(batch.event_times[-1]) + 1e-6


def thin(incidents: Iterable[Incident], model: ModelSpec, batch: Batch,
         rng: np.random.Generator) -> Batch:
    """Drop the records a volume drop removes (each active record kept with
    probability ``1 - magnitude``).

    Examples
    --------
    >>> b = Batch(np.arange(10.0), {"x": np.arange(10.0)})
    >>> drop = Incident("volume_drop-0", VOLUME_DROP, 5.0, 100.0, ("m",), magnitude=1.0)
    >>> thin([drop], type("M", (), {"model_id": "m"})(), b, np.random.default_rng(0)).n
    5
    """
    keep = np.ones(batch.n, dtype=bool)
    for inc in _for(incidents, model.model_id, *_span(batch), [VOLUME_DROP]):
        hit = inc.active(batch.event_times)
        keep &= ~hit | (rng.random(batch.n) >= inc.magnitude)
    return batch if keep.all() else batch.take(keep)


def shift_world(incidents: Iterable[Incident], model: ModelSpec, batch: Batch,
                rng: np.random.Generator) -> Batch:
    """The world after covariate shifts (labels follow these inputs); a new batch."""
    active = _for(incidents, model.model_id, *_span(batch), [COVARIATE_SHIFT])
    if not active:
        return batch
    out = batch.copy()
    for inc in active:
        hit = np.flatnonzero(inc.active(out.event_times))
        for name in inc.features:
            if name in out.features and hit.size:
                col = out.features[name]
                col[hit] = shift_values(model.feature(name), col[hit], inc.mode, inc.magnitude, rng)
    return out


def corrupt(incidents: Iterable[Incident], model: ModelSpec, batch: Batch,
            rng: np.random.Generator) -> Batch:
    """The inputs the model receives after the data bugs (nulls, unit changes, renamed and
    new categories, broken sources); a new batch. The world (and the labels) are unchanged.

    Examples
    --------
    >>> b = Batch(np.array([0.0, 1.0, 2.0]), {"s.normal": np.array([1.0, 2.0, 3.0])})
    >>> unit = Incident("unit_change-0", UNIT_CHANGE, 1.0, 9.0, ("m",), ("s.normal",), 1000.0)
    >>> m = type("M", (), {"model_id": "m"})()
    >>> corrupt([unit], m, b, np.random.default_rng(0)).features["s.normal"].tolist()
    [1.0, 2000.0, 3000.0]
    """
    kinds = [BROKEN_FEATURE, UNIT_CHANGE, CATEGORY_RENAME, CATEGORY_FLOOD, LINEAGE_BREAK]
    active = _for(incidents, model.model_id, *_span(batch), kinds)
    if not active:
        return batch
    out = batch.copy()
    for inc in active:
        hit = inc.active(out.event_times)
        for name in inc.features:
            col = out.features.get(name)
            if col is None or not hit.any():
                continue
            if inc.kind in (BROKEN_FEATURE, LINEAGE_BREAK):
                nulls = hit & (rng.random(col.size) < inc.magnitude)
                col[nulls] = None if col.dtype == object else np.nan
            elif inc.kind == UNIT_CHANGE:
                col[hit] = col[hit] * inc.magnitude
            elif inc.kind == CATEGORY_RENAME:
                renamed = set(top_categories(model.feature(name), inc.magnitude))
                idx = np.flatnonzero(hit)
                col[idx] = np.array([v + RENAME_SUFFIX if v in renamed else v for v in col[idx]],
                                    dtype=object)
            elif inc.kind == CATEGORY_FLOOD:
                col[hit & (rng.random(col.size) < inc.magnitude)] = FLOOD_CATEGORY
    return out


def shift_logit(incidents: Iterable[Incident], model: ModelSpec, t: np.ndarray,
                z: np.ndarray) -> np.ndarray:
    """The served model's logit after silent upgrades (score drift); a new array."""
    out = z.copy()
    if t.size:
        for inc in _for(incidents, model.model_id, float(t[0]), float(t[-1]) + 1e-6, [SCORE_DRIFT]):
            out[inc.active(t)] += inc.magnitude
    return out


def label_probability(incidents: Iterable[Incident], model: ModelSpec, world: Batch,
                      p: np.ndarray) -> np.ndarray:
    """P(y = 1) of each record after concept drift: inverted inside the segment while active.

    Examples
    --------
    >>> m = type("M", (), {"model_id": "m", "segment_feature": "s.c", "segment_value": "a"})()
    >>> b = Batch(np.array([0.0, 1.0]), {"s.c": np.array(["a", "b"], dtype=object)})
    >>> drift = Incident("concept_drift-0", CONCEPT_DRIFT, 0.0, 9.0, ("m",), magnitude=1.0)
    >>> label_probability([drift], m, b, np.array([0.9, 0.9])).round(2).tolist()
    [0.1, 0.9]
    """
    out = p.copy()
    for inc in _for(incidents, model.model_id, *_span(world), [CONCEPT_DRIFT]):
        seg = inc.active(world.event_times) & (world.features[model.segment_feature] == model.segment_value)
        out[seg] = (1 - inc.magnitude) * p[seg] + inc.magnitude * (1 - p[seg])
    return out
