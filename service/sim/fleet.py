"""A simulated fleet: models, their features and upstream sources, seasonal traffic, scores
and delayed labels. Pure numpy, seeded; no clock, no I/O.

The fleet
---------
``n_sources`` upstream sources (e.g. ``payments_db``, ``geo_ip``) each publish a catalog of
features, one of every kind of :data:`KINDS`:

- ``normal``: N(a, b);
- ``lognormal``: exp(N(a, b)) (heavy right tail);
- ``pareto``: a * exp(E / b), E ~ Exp(1): Pareto with scale ``a`` and tail index ``b``;
- ``discrete``: Poisson(a), integers (profiled exactly: few distinct values);
- ``zero_inflated``: 0 with probability :data:`ZERO_SHARE` (70 %), else exp(N(a, b));
- ``cat_low``: 4-8 categories; ``cat_high``: 200-1,000 categories with Zipf-like shares
  (beyond the profile's exact mode of 256 categories).

Every feature has a small base rate of missing values. A model takes
``features_per_model`` features from 2-3 sources (at least one of every kind across its
sources, so each model mixes numeric, heavy-tailed, discrete, zero-inflated and
categorical inputs); sources are shared by many models, so one source breaking touches
several features of several models (lineage). The same source feature has the same
distribution in every model that reads it.

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
>>> fleet = make_fleet(n_models=4, n_sources=3, seed=1)
>>> [m.model_id for m in fleet.models]
['sim-000', 'sim-001', 'sim-002', 'sim-003']
>>> len(fleet.models[0].features), len({f.source for m in fleet.models for f in m.features}) <= 3
(10, True)
>>> batch = sample(fleet.models[0], SIM_EPOCH, SIM_EPOCH + HOUR, rng_for(1, 0, 0))
>>> batch.n > 0 and set(batch.features) == {f.name for f in fleet.models[0].features}
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

HOUR = 3_600
DAY = 86_400
WEEK = 7 * DAY
#: Start of simulated time: Friday 2024-01-05 00:00 UTC (in the past, so the aggregator
#: accepts every event time; a Friday, so a two-day scenario runs into the weekend and
#: compares Saturday's traffic with Thursday's reference).
SIM_EPOCH = int(datetime(2024, 1, 5, tzinfo=UTC).timestamp())

KINDS = ("normal", "lognormal", "pareto", "discrete", "zero_inflated", "cat_low", "cat_high")
NUMERIC_KINDS = frozenset(KINDS[:5])
CATEGORICAL_KINDS = frozenset(KINDS[5:])
SOURCE_NAMES = ("payments_db", "geo_ip", "clickstream", "crm", "device_fp", "ledger",
                "search_logs", "ads_server", "inventory", "weather_feed")

ZERO_SHARE = 0.7
VOLUME_DAILY = 0.4
VOLUME_PEAK_HOUR = 14.0
WEEKEND_VOLUME = 0.8
MIX_DAILY = 0.1
MIX_WEEKLY = 0.05
CAT_MIX_DAILY = 0.1
BASE_NULL_RATE = 0.02  # at most; each feature draws its own in [0, BASE_NULL_RATE)
LOGIT_SPREAD = 2.0  # sd of the logit: scores with a ROC AUC near 0.85


@dataclass(frozen=True)
class FeatureSpec:
    """One source feature: its distribution and its seasonal movement.

    Attributes
    ----------
    name : str
        ``"<source>.<kind>"``, the name models log it under.
    source : str
        The upstream source (lineage).
    kind : str
        One of :data:`KINDS`.
    a, b : float
        Distribution parameters (see the module docstring); unused ones are 0.
    null_rate : float
        Share of missing values, in [0, 1).
    phase : float
        Hour of day of the seasonal peak, in [0, 24).
    categories : tuple of str
        Categorical kinds: the category labels.
    probs : tuple of float
        Categorical kinds: base shares (sum 1).
    tilt : tuple of float
        Categorical kinds: per category, the direction of its daily log-odds movement.
    effects : tuple of float
        Categorical kinds: per category, its standardized contribution to the logit.
    """

    name: str
    source: str
    kind: str
    a: float = 0.0
    b: float = 0.0
    null_rate: float = 0.0
    phase: float = 0.0
    categories: tuple[str, ...] = ()
    probs: tuple[float, ...] = ()
    tilt: tuple[float, ...] = ()
    effects: tuple[float, ...] = ()

    @property
    def categorical(self) -> bool:
        return self.kind in CATEGORICAL_KINDS

    @property
    def declared_type(self) -> str:
        """The type declared at registration: ``"numeric"`` or ``"categorical"``."""
        return "categorical" if self.categorical else "numeric"


@dataclass(frozen=True)
class ModelSpec:
    """One model of the fleet.

    Attributes
    ----------
    model_id : str
    index : int
        Position in the fleet (seeds its random streams).
    features : tuple of FeatureSpec
    weights : tuple of float
        Logistic coefficient per feature, in the order of ``features``.
    intercept : float
    rate_per_hour : float
        Mean predictions per hour before seasonality.
    tier : int
        1 (labels joined, performance monitored) or 2.
    label_delay_seconds : float
        Mean delay of a label after its prediction (each label: 0.5-1.5 times it).
    segment_feature : str
        A low-cardinality categorical feature of the model (concept drift hits a segment).
    segment_value : str
        The segment: one category of ``segment_feature``.
    """

    model_id: str
    index: int
    features: tuple[FeatureSpec, ...]
    weights: tuple[float, ...]
    intercept: float
    rate_per_hour: float
    tier: int
    label_delay_seconds: float
    segment_feature: str
    segment_value: str

    def feature(self, name: str) -> FeatureSpec:
        for f in self.features:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(sorted({f.source for f in self.features}))


@dataclass(frozen=True)
class Fleet:
    """The simulated fleet.

    Attributes
    ----------
    seed : int
    models : tuple of ModelSpec
    catalog : dict
        Source name -> its features (one per kind).
    """

    seed: int
    models: tuple[ModelSpec, ...]
    catalog: dict[str, tuple[FeatureSpec, ...]] = field(default_factory=dict)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(self.catalog)

    def model(self, model_id: str) -> ModelSpec:
        for m in self.models:
            if m.model_id == model_id:
                return m
        raise KeyError(model_id)

    def readers(self, feature: str) -> tuple[str, ...]:
        """Models that take ``feature``."""
        return tuple(m.model_id for m in self.models if any(f.name == feature for f in m.features))


@dataclass
class Batch:
    """One model's predictions over a span of simulated time, as columns.

    Attributes
    ----------
    event_times : numpy.ndarray
        float64 Unix seconds, sorted.
    features : dict
        Name -> column: float64 (NaN missing) for numeric features, object arrays of
        ``str`` / ``None`` for categorical ones.
    """

    event_times: np.ndarray
    features: dict[str, np.ndarray]

    @property
    def n(self) -> int:
        return int(self.event_times.size)

    def take(self, keep: np.ndarray) -> Batch:
        """The records where ``keep`` (bool mask or indices) holds."""
        return Batch(self.event_times[keep], {k: v[keep] for k, v in self.features.items()})

    def copy(self) -> Batch:
        return Batch(self.event_times.copy(), {k: v.copy() for k, v in self.features.items()})


# -- construction -----------------------------------------------------------------------
def _source_names(n: int) -> tuple[str, ...]:
    if n <= len(SOURCE_NAMES):
        return SOURCE_NAMES[:n]
    return SOURCE_NAMES + tuple(f"source_{i:02d}" for i in range(len(SOURCE_NAMES), n))


def _feature(rng: np.random.Generator, source: str, kind: str) -> FeatureSpec:
    common = {"name": f"{source}.{kind}", "source": source, "kind": kind,
              "null_rate": float(rng.uniform(0, BASE_NULL_RATE)), "phase": float(rng.uniform(0, 24))}
    if kind == "normal":
        return FeatureSpec(a=float(rng.uniform(-5, 50)), b=float(rng.uniform(1, 10)), **common)
    if kind == "lognormal":
        return FeatureSpec(a=float(rng.uniform(1, 4)), b=float(rng.uniform(0.5, 1.2)), **common)
    if kind == "pareto":
        return FeatureSpec(a=float(rng.uniform(1, 10)), b=float(rng.uniform(1.5, 3.0)), **common)
    if kind == "discrete":
        return FeatureSpec(a=float(rng.uniform(1, 8)), **common)
    if kind == "zero_inflated":
        return FeatureSpec(a=float(rng.uniform(2, 5)), b=1.0, **common)
    k = int(rng.integers(4, 9)) if kind == "cat_low" else int(rng.integers(200, 1001))
    if kind == "cat_low":
        probs = rng.dirichlet(np.full(k, 3.0))
        labels = tuple(f"c{i}" for i in range(k))
    else:
        probs = 1.0 / np.arange(1, k + 1) ** 1.1
        probs /= probs.sum()
        labels = tuple(f"v{i:04d}" for i in range(k))
    effects = rng.normal(0, 1, k)
    if kind == "cat_high":
        effects[20:] = 0.0  # only the head carries signal
    effects -= np.dot(probs, effects)
    sd = math.sqrt(float(np.dot(probs, effects ** 2))) or 1.0
    return FeatureSpec(categories=labels, probs=tuple(probs.tolist()),
                       tilt=tuple(rng.normal(0, 1, k).tolist()),
                       effects=tuple((effects / sd).tolist()), **common)


def make_fleet(n_models: int = 200, n_sources: int = 10, features_per_model: int = 10,
               seed: int = 0, tier1_share: float = 0.025, rate_per_hour: float = 300.0) -> Fleet:
    """Build a fleet.

    Parameters
    ----------
    n_models : int
        Models, >= 1.
    n_sources : int
        Upstream sources, >= 2; models draw 2-3 of them.
    features_per_model : int
        Features per model, in [len(KINDS), 2 * len(KINDS)].
    seed : int
    tier1_share : float
        Share of models registered as tier 1 (labels joined), in [0, 1]; at least one
        model when positive.
    rate_per_hour : float
        Fleet mean of predictions per hour per model (each model: 0.6-1.6 times it).

    Returns
    -------
    Fleet

    Raises
    ------
    ValueError
        On a parameter out of range.

    Examples
    --------
    >>> f = make_fleet(n_models=20, seed=3, tier1_share=0.1)
    >>> sum(m.tier == 1 for m in f.models), len(f.sources)
    (2, 10)
    >>> kinds = {x.kind for x in f.models[5].features}
    >>> kinds == set(KINDS)
    True
    """
    if n_models < 1 or n_sources < 2:
        raise ValueError("n_models must be >= 1 and n_sources >= 2")
    if not len(KINDS) <= features_per_model <= 2 * len(KINDS):
        raise ValueError(f"features_per_model must be in [{len(KINDS)}, {2 * len(KINDS)}]")
    if not 0.0 <= tier1_share <= 1.0 or rate_per_hour <= 0:
        raise ValueError("tier1_share must be in [0, 1] and rate_per_hour > 0")
    rng = np.random.default_rng([seed, 0xF1EE7])
    sources = _source_names(n_sources)
    catalog = {s: tuple(_feature(rng, s, k) for k in KINDS) for s in sources}
    n_tier1 = 0 if tier1_share == 0 else max(1, round(tier1_share * n_models))
    tier1 = set(rng.choice(n_models, size=n_tier1, replace=False).tolist()) if n_tier1 else set()
    models = []
    for i in range(n_models):
        own = [sources[j] for j in rng.choice(n_sources, size=int(rng.integers(2, min(3, n_sources) + 1)),
                                              replace=False)]
        # one of every kind, each from one of the model's sources, then the rest at random
        picked = {(str(rng.choice(own)), k) for k in KINDS}
        pool = [(s, k) for s in own for k in KINDS if (s, k) not in picked]
        extra = features_per_model - len(picked)
        for j in rng.choice(len(pool), size=min(extra, len(pool)), replace=False):
            picked.add(pool[int(j)])
        feats = tuple(next(f for f in catalog[s] if f.kind == k) for s, k in sorted(picked))
        weights = rng.normal(0, 1, len(feats))
        weights *= LOGIT_SPREAD / float(np.linalg.norm(weights))
        segment = next(f for f in feats if f.kind == "cat_low")
        models.append(ModelSpec(
            model_id=f"sim-{i:03d}", index=i, features=feats, weights=tuple(weights.tolist()),
            intercept=float(rng.uniform(-1.2, 0.0)),
            rate_per_hour=float(rate_per_hour * rng.uniform(0.6, 1.6)),
            tier=1 if i in tier1 else 2,
            label_delay_seconds=float(rng.uniform(0.25, 1.0) * HOUR),
            segment_feature=segment.name,
            segment_value=segment.categories[int(np.argmax(segment.probs))],
        ))
    return Fleet(seed=seed, models=tuple(models), catalog=catalog)


# -- seasonality ---------------------------------------------------------------------------
def hour_of_day(t: np.ndarray | float) -> np.ndarray | float:
    """Hours since midnight UTC (fractional)."""
    return (np.asarray(t, dtype=np.float64) % DAY) / HOUR


def is_weekend(t: np.ndarray | float) -> np.ndarray:
    """Saturday or Sunday (UTC); 1970-01-01 was a Thursday.

    Examples
    --------
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


# -- sampling ------------------------------------------------------------------------------
def rng_for(seed: int, model_index: int, slot: int, stream: int = 0) -> np.random.Generator:
    """The random stream of one model, one span of time and one purpose (``stream``), so
    that every batch is reproducible whatever the order it is drawn in. All >= 0."""
    return np.random.default_rng([seed, model_index, slot, stream])


def sample_feature(spec: FeatureSpec, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Values of one feature at event times ``t`` (missing: NaN / None).

    Categorical shares use the seasonal tilt of each record's hour.

    Examples
    --------
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
    """About ``rows`` clean predictions spread over the day from ``start`` with the day's
    volume profile (so the reference holds the whole daily feature mix).

    Examples
    --------
    >>> m = make_fleet(n_models=1, seed=0).models[0]
    >>> b = reference_batch(m, SIM_EPOCH, rng_for(0, 0, 0, 1), 2_000)
    >>> 1_800 < b.n < 2_200, bool(b.event_times.min() >= SIM_EPOCH)
    (True, True)
    """
    volume = rows / expected_count(model, start, start + DAY)
    return sample(model, start, start + DAY, rng, volume)
