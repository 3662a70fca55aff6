"""A scenario as the model servers send it: what to simulate (:class:`SimOptions`), the fleet
and its corpus, each model's registration, each hour's predictions and labels, and the
reference rows. Pure and reproducible."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from service.sim import fleet as fl
from service.sim import incidents as inc
from service.sim import injection as inj
from service.sim import sampling as smp

WINDOW_SECONDS = fl.HOUR
MODEL_VERSION = "1"  # a silent upgrade keeps it
REFERENCE_STREAM, TRAFFIC_STREAM = 1, 0


@dataclass(frozen=True)
class SimOptions:
    """What to simulate.

    Attributes
    ----------
    models, days, seed : int
        Fleet size, simulated days, seed of everything.
    rate_per_hour : float
        Mean predictions per model and hour before seasonality (each model 0.6-1.6 times
        it, the hour of day 0.6-1.4 times, weekends 0.8 times): ~90-670 per one-hour
        window at the default.
    n_sources, features_per_model : int
    tier1_share : float
        Share of models registered as tier 1 with label-joined performance checks.
    reference_rows : int
        Rows of each model's reference profile (the day before the scenario).
    label_fraction : float
        Share of tier-1 predictions that get a label.
    control_share : float
        Share of models no incident touches.
    control_days : int
        Leading days without any incident.
    counts : dict, optional
        Incidents per kind (default: scaled with fleet size and days).
    """

    models: int = 200
    days: int = 2
    seed: int = 0
    rate_per_hour: float = 300.0
    n_sources: int = 10
    features_per_model: int = 10
    tier1_share: float = 0.025
    reference_rows: int = 2_000
    label_fraction: float = 0.98
    control_share: float = 0.25
    control_days: int = 0
    counts: dict[str, int] | None = field(default=None)


def build_scenario(opts: SimOptions) -> inc.Scenario:
    """The fleet and its incident corpus (pure)."""
    fleet = fl.make_fleet(opts.models, opts.n_sources, opts.features_per_model, opts.seed,
                          opts.tier1_share, opts.rate_per_hour)
    return inc.make_scenario(fleet, opts.days, opts.seed, WINDOW_SECONDS,
                             control_days=opts.control_days, control_share=opts.control_share,
                             counts=opts.counts)


def registration(m: fl.ModelSpec, opts: SimOptions) -> dict[str, Any]:
    """``POST /v1/models`` body: lineage, window, tier and, for tier 1, a ``performance``
    section with the defaults (labels joined; no floor or horizon of the simulator's own)."""
    body: dict[str, Any] = {
        "model_id": m.model_id, "window_seconds": WINDOW_SECONDS, "tier": m.tier,
        "owner": f"team-{m.index % 8}",
        "features": {f.name: {"type": f.declared_type, "source": f.source} for f in m.features},
    }
    if m.tier == 1:
        body["performance"] = {}
    return body


def wire_column(spec: fl.FeatureSpec, x: np.ndarray) -> list[Any]:
    """A column as the model server logs it: missing values as None, discrete features as
    integers.

    Examples
    --------
    >>> spec = fl.FeatureSpec("s.discrete", "s", "discrete", a=3.0)
    >>> wire_column(spec, np.array([2.0, np.nan, 5.0]))
    [2, None, 5]
    """
    if spec.categorical:
        return x.tolist()
    missing = np.isnan(x)
    values = np.where(missing, 0, x).astype(np.int64).tolist() if spec.kind == "discrete" else x.tolist()
    for i in np.flatnonzero(missing).tolist():
        values[i] = None
    return values


@dataclass
class HourTraffic:
    """One model's traffic in one simulated hour, ready to log."""

    event_times: list[float]
    features: dict[str, list[Any]]
    scores: list[float]
    prediction_ids: list[str]
    labels: list[tuple[float, str, bool]]  # (time the label is known, prediction id, label)


def traffic(scenario: inc.Scenario, model: fl.ModelSpec, hour: int,
            label_fraction: float = 1.0) -> HourTraffic:
    """The model's predictions (after the incidents) and its labels (tier 1) in hour
    ``hour`` of the scenario. Pure and reproducible.

    Examples
    --------
    >>> s = build_scenario(SimOptions(models=2, days=2, counts={}))
    >>> a, b = traffic(s, s.fleet.models[0], 3), traffic(s, s.fleet.models[0], 3)
    >>> a.prediction_ids == b.prediction_ids and a.scores == b.scores and len(a.scores) > 0
    True
    """
    t0 = scenario.start + hour * fl.HOUR
    rng = smp.rng_for(scenario.seed, model.index, hour, TRAFFIC_STREAM)
    clean = inj.thin(scenario.incidents, model, smp.sample(model, t0, t0 + fl.HOUR, rng), rng)
    world = inj.shift_world(scenario.incidents, model, clean, rng)
    seen = inj.corrupt(scenario.incidents, model, world, rng)
    z = inj.shift_logit(scenario.incidents, model, seen.event_times, smp.logit(model, seen.features))
    scores = 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))
    pids = [f"{model.index}-{hour}-{i}" for i in range(seen.n)]
    labels: list[tuple[float, str, bool]] = []
    if model.tier == 1 and seen.n:
        p = inj.label_probability(scenario.incidents, model, world, smp.score(model, world.features))
        y = smp.labels(p, rng)
        due = seen.event_times + smp.label_delays(model, seen.n, rng)
        keep = rng.random(seen.n) < label_fraction
        labels = [(float(due[i]), pids[i], bool(y[i])) for i in np.flatnonzero(keep).tolist()]
    return HourTraffic(seen.event_times.tolist(),
                       {f.name: wire_column(f, seen.features[f.name]) for f in model.features},
                       scores.tolist(), pids, labels)


def reference_frame(scenario: inc.Scenario, model: fl.ModelSpec, rows: int) -> dict[str, list[Any]]:
    """The model's reference data: clean traffic of the day before the scenario, with scores."""
    rng = smp.rng_for(scenario.seed, model.index, 0, REFERENCE_STREAM)
    batch = smp.reference_batch(model, scenario.reference_start, rng, rows)
    cols = {f.name: wire_column(f, batch.features[f.name]) for f in model.features}
    cols["score"] = smp.score(model, batch.features).tolist()
    return cols
