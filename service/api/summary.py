"""Human-readable summaries of profiles, as served by the API."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sketches.categorical import CategoricalSketch, category_display
from sketches.numeric import NumericSketch
from sketches.profile import FeatureProfile, WindowProfile
from sketches.vector import VectorProfile

QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)
TOP_CATEGORIES = 10


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def top_categories(s: CategoricalSketch) -> dict[str, int]:
    """The most frequent categories as users read them: ``True`` is ``"true (bool)"``,
    ``123`` is ``"123 (int)"``, a string is itself."""
    return {category_display(k): c for k, c in s.frequencies(TOP_CATEGORIES).items()}


def numeric_summary(s: NumericSketch) -> dict[str, Any]:
    if s.count == 0:
        return {"count": 0}
    return {
        "count": s.count,
        "min": s.min,
        "max": s.max,
        "mean": _finite(s.mean),
        "std": _finite(math.sqrt(s.variance)),
        "quantiles": {f"p{round(q * 100)}": s.quantile(q) for q in QUANTILES},
        "exact": s.is_exact,
    }


def feature_summary(f: FeatureProfile) -> dict[str, Any]:
    total = f.total
    out: dict[str, Any] = {
        "kind": f.kind,
        "null_rate": f.null_count / total if total else None,
        "null_count": f.null_count,
        "inf_count": f.inf_count,
        "type_mismatch_count": f.type_mismatch_count,
    }
    if f.kind == "numeric":
        out.update(numeric_summary(f.numeric))
    elif f.kind == "categorical":
        out["count"] = f.categorical.count
        out["distinct"] = f.categorical.distinct
        out["top"] = top_categories(f.categorical)
    return out


def vector_summary(v: VectorProfile) -> dict[str, Any]:
    """A vector feature's dimension, count, null rate, norms and the norm of its mean vector."""
    total = v.count + v.nulls
    return {"kind": "vector", "dim": v.dim, "projection_dim": v.k, "count": v.count,
            "null_rate": v.nulls / total if total else None, "null_count": v.nulls,
            "norm": numeric_summary(v.norms),
            "mean_vector_norm": float(np.linalg.norm(v.mean)) if v.count else None}


def window_summary(p: WindowProfile) -> dict[str, Any]:
    """Count, per-feature null rate, quantiles and top categories, vector features, score summary."""
    return {
        "window_start": p.window_start,
        "window_end": p.window_end,
        "count": p.count,
        "insufficient_data": p.is_empty,
        "versions": dict(p.versions),
        "features": {k: feature_summary(f) for k, f in sorted(p.features.items())},
        "vectors": {k: vector_summary(v) for k, v in sorted(p.vectors.items())},
        "score": numeric_summary(p.score),
        "predictions": top_categories(p.prediction),
    }
