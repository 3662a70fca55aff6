"""A simulated fleet: models, their features and upstream sources (their traffic, scores and
labels: :mod:`service.sim.sampling`). Pure numpy, seeded; no clock, no I/O.

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
  (counted exactly: the profile's exact table holds 1,024).

Every feature has a small base rate of missing values. A model takes
``features_per_model`` features from 2-3 sources (at least one of every kind across its
sources, so each model mixes numeric, heavy-tailed, discrete, zero-inflated and
categorical inputs); sources are shared by many models, so one source breaking touches
several features of several models (lineage). The same source feature has the same
distribution in every model that reads it.

Examples
--------
>>> fleet = make_fleet(n_models=4, n_sources=3, seed=1)
>>> [m.model_id for m in fleet.models]
['sim-000', 'sim-001', 'sim-002', 'sim-003']
>>> len(fleet.models[0].features), len({f.source for m in fleet.models for f in m.features}) <= 3
(10, True)
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


# -- sampling ------------------------------------------------------------------------------
