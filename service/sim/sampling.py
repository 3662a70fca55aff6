"""The simulated fleet's traffic: seasonal volume and feature mix, sampled records, scores
and delayed labels. Pure numpy, seeded; no clock, no I/O.

Seasonality
-----------
Volume: ``rate_per_hour`` times a daily factor ``1 + VOLUME_DAILY sin(2 pi (h - 8) / 24)``
(peak at 14:00 UTC) times ``WEEKEND_VOLUME`` on Saturdays and Sundays. Feature mix: each
source feature's mean moves with the hour of day by up to ``MIX_DAILY`` of its spread
(its own peak hour; Pareto features stretch their tail, keeping their minimum; zero-inflated
ones change their share of zeros), by ``MIX_WEEKLY`` more on weekends, and category shares
tilt by up to ``CAT_MIX_DAILY`` in log-odds along a fixed random direction: real, but below
any alert floor (population PSI ~0.01-0.02) when an hourly window is compared with a
whole-day reference.

Scores and labels
-----------------
A model is a fixed logistic model of standardized transforms of its features (missing
values contribute 0, their mean): ``score = sigmoid(intercept + sum_j w_j g_j(x_j))``.
Labels are calibrated: ``y ~ Bernoulli(score of the true inputs)``, known after a
per-model label delay.

Examples
--------
>>> from service.sim.fleet import SIM_EPOCH, make_fleet
>>> fleet = make_fleet(n_models=4, n_sources=3, seed=1)
>>> batch = sample(fleet.models[0], SIM_EPOCH, SIM_EPOCH + HOUR, rng_for(1, 0, 0))
>>> batch.n > 0 and set(batch.features) == {f.name for f in fleet.models[0].features}
True
"""

from __future__ import annotations

import math

import numpy as np

from service.sim.fleet import DAY, HOUR, ZERO_SHARE, Batch, FeatureSpec, ModelSpec

VOLUME_DAILY = 0.4
VOLUME_PEAK_HOUR = 14.0
WEEKEND_VOLUME = 0.8
MIX_DAILY = 0.1
MIX_WEEKLY = 0.05
CAT_MIX_DAILY = 0.1


def hour_of_day(t: np.ndarray | float) -> np.ndarray | float:
    """Hours since midnight UTC (fractional)."""
    return (np.asarray(t, dtype=np.float64) % DAY) / HOUR


def is_weekend(t: np.ndarray | float) -> np.ndarray:
    """Saturday or Sunday (UTC); 1970-01-01 was a Thursday.

    Examples
    --------
    >>> from service.sim.fleet import SIM_EPOCH
    >>> bool(is_weekend(SIM_EPOCH)), bool(is_weekend(SIM_EPOCH + DAY))
    (False, True)
    """
    return ((np.asarray(t, dtype=np.float64) // DAY + 3) % 7) >= 5


def daily(t: np.ndarray | float, phase: float) -> np.ndarray:
    """The daily seasonal wave, in [-1, 1], peaking at hour ``phase``."""
    return np.sin(2 * np.pi * (hour_of_day(t) - phase + 6.0) / 24.0)


def volume_factor(t: np.ndarray | float) -> np.ndarray:
    """Seasonal multiplier of a model's rate at time ``t``.

    Examples
    --------
    >>> from service.sim.fleet import SIM_EPOCH
    >>> peak, trough = SIM_EPOCH + 14 * HOUR, SIM_EPOCH + 2 * HOUR
    >>> round(float(volume_factor(peak)), 3), round(float(volume_factor(trough)), 3)
    (1.4, 0.6)
    """
    return (1.0 + VOLUME_DAILY * daily(t, VOLUME_PEAK_HOUR)) * np.where(is_weekend(t), WEEKEND_VOLUME, 1.0)


def expected_count(model: ModelSpec, t0: float, t1: float) -> float:
    """Mean number of predictions of ``model`` in ``[t0, t1)`` (midpoint rule per hour)."""
    edges = np.arange(t0, t1, HOUR, dtype=np.float64)
    widths = np.minimum(edges + HOUR, t1) - edges
    return float(model.rate_per_hour * np.sum(volume_factor(edges + widths / 2) * widths / HOUR))


def rng_for(seed: int, model_index: int, slot: int, stream: int = 0) -> np.random.Generator:
    """The random stream of one model, one span of time and one purpose (``stream``), so
    that every batch is reproducible whatever the order it is drawn in. All >= 0."""
    return np.random.default_rng([seed, model_index, slot, stream])


def sample_feature(spec: FeatureSpec, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Values of one feature at event times ``t`` (missing: NaN / None).

    Categorical shares use the seasonal tilt of each record's hour.

    Examples
    --------
    >>> from service.sim.fleet import SIM_EPOCH
    >>> spec = FeatureSpec("s.normal", "s", "normal", a=10.0, b=2.0)
    >>> x = sample_feature(spec, np.full(20_000, float(SIM_EPOCH)), np.random.default_rng(0))
    >>> bool(abs(x.mean() - 10.0) < 0.3), bool(abs(x.std() - 2.0) < 0.1)
    (True, True)
    """
    n = t.size
    # the seasonal move, in units of the feature's spread
    s = daily(t, spec.phase) * MIX_DAILY + np.where(is_weekend(t), MIX_WEEKLY, 0.0)
    if spec.kind == "normal":
        x = spec.a + spec.b * (rng.standard_normal(n) + s)
    elif spec.kind == "lognormal":
        x = np.exp(spec.a + spec.b * (rng.standard_normal(n) + s))
    elif spec.kind == "pareto":  # ln(x / a) ~ Exp(b) stretched: the minimum a stays put
        x = spec.a * np.exp(rng.exponential(1.0, n) * (1.0 + s) / spec.b)
    elif spec.kind == "discrete":
        x = rng.poisson(np.maximum(spec.a + s * math.sqrt(spec.a), 0.1)).astype(np.float64)
    elif spec.kind == "zero_inflated":
        zero = rng.random(n) < ZERO_SHARE - math.sqrt(ZERO_SHARE * (1 - ZERO_SHARE)) * s
        x = np.where(zero, 0.0, np.exp(spec.a + spec.b * rng.standard_normal(n)))
    else:
        x = np.empty(n, dtype=object)
        labels = np.asarray(spec.categories, dtype=object)
        hours = (t // HOUR).astype(np.int64)
        for hour in np.unique(hours):  # the shares of each hour of the batch
            rows = np.flatnonzero(hours == hour)
            logits = np.log(np.asarray(spec.probs)) + CAT_MIX_DAILY * float(
                daily(hour * HOUR + HOUR / 2, spec.phase)) * np.asarray(spec.tilt)
            p = np.exp(logits - logits.max())
            x[rows] = labels[rng.choice(len(spec.categories), size=rows.size, p=p / p.sum())]
        if spec.null_rate:
            x[rng.random(n) < spec.null_rate] = None
        return x
    if spec.null_rate:
        x[rng.random(n) < spec.null_rate] = np.nan
    return x


def sample(model: ModelSpec, t0: float, t1: float, rng: np.random.Generator,
           volume: float = 1.0) -> Batch:
    """The model's clean traffic in ``[t0, t1)``: a Poisson number of predictions
    (seasonal mean times ``volume``) at uniform event times.

    Raises
    ------
    ValueError
        If ``t1 <= t0`` or ``volume < 0``.
    """
    if t1 <= t0 or volume < 0:
        raise ValueError("need t1 > t0 and volume >= 0")
    n = int(rng.poisson(expected_count(model, t0, t1) * volume))
    t = np.sort(rng.uniform(t0, t1, n))
    return Batch(t, {f.name: sample_feature(f, t, rng) for f in model.features})


def standardized(spec: FeatureSpec, x: np.ndarray) -> np.ndarray:
    """g(x): the feature's standardized contribution to the logit (missing or unknown: 0).

    Examples
    --------
    >>> spec = FeatureSpec("s.normal", "s", "normal", a=10.0, b=2.0)
    >>> standardized(spec, np.array([12.0, np.nan])).tolist()
    [1.0, 0.0]
    """
    if spec.categorical:
        index = {c: e for c, e in zip(spec.categories, spec.effects, strict=True)}
        return np.fromiter((index.get(v, 0.0) for v in x), dtype=np.float64, count=x.size)
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if spec.kind == "normal":
            g = (x - spec.a) / spec.b
        elif spec.kind == "lognormal":
            g = (np.log(np.maximum(x, 1e-300)) - spec.a) / spec.b
        elif spec.kind == "pareto":
            g = np.log(np.maximum(x, 1e-300) / spec.a) * spec.b - 1.0
        elif spec.kind == "discrete":
            g = (x - spec.a) / math.sqrt(spec.a)
        else:  # zero_inflated: does the value occur at all
            g = ((x > 0).astype(np.float64) - (1 - ZERO_SHARE)) / math.sqrt(ZERO_SHARE * (1 - ZERO_SHARE))
            g[np.isnan(x)] = 0.0
    return np.nan_to_num(g, nan=0.0, posinf=50.0, neginf=-50.0)


def logit(model: ModelSpec, features: dict[str, np.ndarray]) -> np.ndarray:
    """intercept + sum_j w_j g_j(x_j): the model's logit of each record."""
    n = next(iter(features.values())).size if features else 0
    z = np.full(n, model.intercept)
    for f, w in zip(model.features, model.weights, strict=True):
        z += w * standardized(f, features[f.name])
    return z


def score(model: ModelSpec, features: dict[str, np.ndarray]) -> np.ndarray:
    """The model's score P(y = 1 | x) of each record (a fixed logistic model).

    Examples
    --------
    >>> from service.sim.fleet import SIM_EPOCH, make_fleet
    >>> m = make_fleet(n_models=1, seed=0).models[0]
    >>> b = sample(m, SIM_EPOCH, SIM_EPOCH + DAY, rng_for(0, 0, 0))
    >>> s = score(m, b.features)
    >>> bool(((s > 0) & (s < 1)).all()), bool(0.15 < s.mean() < 0.6)
    (True, True)
    """
    return 1.0 / (1.0 + np.exp(-np.clip(logit(model, features), -50, 50)))


def labels(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Calibrated binary labels: y ~ Bernoulli(p)."""
    return rng.random(p.size) < p


def label_delays(model: ModelSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    """Seconds from each prediction to its label: 0.5-1.5 times the model's mean delay."""
    return model.label_delay_seconds * rng.uniform(0.5, 1.5, n)


def reference_batch(model: ModelSpec, start: float, rng: np.random.Generator, rows: int) -> Batch:
    """About ``rows`` clean predictions at uniform times over the day from ``start`` (so the
    reference holds the whole daily feature mix, each hour weighted alike: its event times
    do not follow the day's volume wave, and the simulator uploads it without them).

    Examples
    --------
    >>> from service.sim.fleet import SIM_EPOCH, make_fleet
    >>> m = make_fleet(n_models=1, seed=0).models[0]
    >>> b = reference_batch(m, SIM_EPOCH, rng_for(0, 0, 0, 1), 2_000)
    >>> 1_800 < b.n < 2_200, bool(b.event_times.min() >= SIM_EPOCH)
    (True, True)
    """
    volume = rows / expected_count(model, start, start + DAY)
    return sample(model, start, start + DAY, rng, volume)
