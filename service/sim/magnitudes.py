"""How much a covariate shift moves a feature: its shifted values and the population PSI of a
magnitude (and the magnitude of a PSI). Pure numpy, seeded."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from service.sim.fleet import (
    FeatureSpec,
)
from service.sim.sampling import sample_feature


def shift_values(spec: FeatureSpec, x: np.ndarray, mode: str, magnitude: float,
                 rng: np.random.Generator) -> np.ndarray:
    """Values of ``spec`` after a covariate shift (a new array; missing values stay missing).

    Location shifts move the feature by ``magnitude`` of its spread in its natural scale
    (log scale for lognormal, Pareto and the non-zero part of zero-inflated features, the
    Poisson mean for discrete ones, rounded stochastically); scale shifts multiply the
    spread by ``magnitude``.

    Raises
    ------
    ValueError
        For a categorical feature.

    Examples
    --------
    >>> spec = FeatureSpec("s.normal", "s", "normal", a=10.0, b=2.0)
    >>> shift_values(spec, np.array([10.0, 12.0, np.nan]), "location", 0.5, None).tolist()
    [11.0, 13.0, nan]
    >>> shift_values(spec, np.array([10.0, 12.0]), "scale", 2.0, None).tolist()
    [10.0, 14.0]
    """
    if spec.categorical:
        raise ValueError(f"covariate shifts apply to numeric features, not {spec.name!r}")
    x = np.asarray(x, dtype=np.float64)
    loc = mode == "location"
    with np.errstate(divide="ignore", invalid="ignore"):
        if spec.kind == "normal":
            return x + magnitude * spec.b if loc else spec.a + (x - spec.a) * magnitude
        if spec.kind in ("lognormal", "zero_inflated"):
            lx = np.log(np.where(x > 0, x, np.nan))
            moved = lx + magnitude * spec.b if loc else spec.a + (lx - spec.a) * magnitude
            return np.where(x > 0, np.exp(moved), x)
        if spec.kind == "pareto":
            e = np.log(x / spec.a)  # Exp(b): mean and sd 1 / b
            moved = e + magnitude / spec.b if loc else np.maximum(e * magnitude, 0.0)
            return spec.a * np.exp(moved)
        # discrete
        lam = spec.a
        moved = x + magnitude * math.sqrt(lam) if loc else lam + (x - lam) * magnitude
        return np.where(np.isnan(x), np.nan, np.maximum(np.floor(moved + rng.random(x.size)), 0.0))


def magnitude_for_psi(spec: FeatureSpec, mode: str, target: float, seed: int = 0) -> float | None:
    """The shift ``magnitude`` whose population PSI is ``target`` (bisection on common random
    numbers, relative tolerance 1 %); None when even a gross shift stays below it.

    Examples
    --------
    >>> spec = FeatureSpec("s.normal", "s", "normal", a=0.0, b=1.0)
    >>> round(magnitude_for_psi(spec, "location", 0.25), 1)
    0.5
    """
    lo, hi = (0.0, 4.0) if mode == "location" else (1.0, 8.0)
    if population_psi(spec, mode, hi, 20_000, seed) < target:
        return None
    for _ in range(30):
        mid = (lo + hi) / 2
        psi = population_psi(spec, mode, mid, 20_000, seed)
        if abs(psi - target) <= 0.01 * target:
            return mid
        lo, hi = (mid, hi) if psi < target else (lo, mid)
    return (lo + hi) / 2


def population_psi(spec: FeatureSpec, mode: str, magnitude: float, n: int = 40_000,
                   seed: int = 0) -> float:
    """Population PSI of a covariate shift of ``spec``: 10 bins at the deciles of the
    unshifted distribution (one bin per value when it has at most 10), masses floored at
    1e-4, ``n`` draws per side (Monte Carlo).

    Examples
    --------
    >>> spec = FeatureSpec("s.normal", "s", "normal", a=0.0, b=1.0)
    >>> round(population_psi(spec, "location", 0.5), 2), round(population_psi(spec, "location", 0.0), 3)
    (0.23, 0.0)
    """
    rng = np.random.default_rng(seed)
    t = np.zeros(n)
    clean = replace(spec, null_rate=0.0)
    ref = sample_feature(clean, t, rng)
    cur = shift_values(clean, sample_feature(clean, t, np.random.default_rng(seed + 1)), mode,
                       magnitude, np.random.default_rng(seed + 2))
    distinct = np.unique(ref)
    if distinct.size <= 10:
        edges = (distinct[:-1] + distinct[1:]) / 2
    else:
        edges = np.unique(np.quantile(ref, np.linspace(0, 1, 11)[1:-1]))
    r = np.bincount(np.searchsorted(edges, ref), minlength=edges.size + 1) / n
    c = np.bincount(np.searchsorted(edges, cur), minlength=edges.size + 1) / n
    r, c = np.maximum(r, 1e-4), np.maximum(c, 1e-4)
    return float(np.sum((c - r) * np.log(c / r)))
