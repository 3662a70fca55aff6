"""The injected-incident corpus: what breaks, where, when and how much. Pure numpy, seeded.

Kinds (:data:`INCIDENT_KINDS`), each with its ``magnitude``:

==================  =======================================================================
covariate_shift     the world moves (labels follow) for one numeric feature: ``mode``
                    location (shift by ``magnitude`` of the feature's spread, in its
                    natural scale: log scale for heavy tails) or scale (spread times
                    ``magnitude``). ``psi``: the population PSI (10 reference-quantile
                    bins) the magnitude is calibrated to, from :data:`PSI_LADDER`.
broken_feature      the feature arrives null in a share ``magnitude`` of records.
unit_change         a numeric feature arrives multiplied by ``magnitude`` (1000).
category_rename     the top categories (a share ``magnitude`` of values) arrive renamed.
category_flood      a new category takes a share ``magnitude`` of values.
lineage_break       one upstream ``source`` breaks: every feature of it arrives null (share
                    ``magnitude``) in several models reading it.
score_drift         a silent model upgrade: the logit moves by ``magnitude``.
concept_drift       in one segment (``segment_feature == segment_value``) the labels invert
                    (y ~ Bernoulli(1 - p)): inputs and scores unchanged, performance drops.
volume_drop         a share ``magnitude`` of the model's traffic disappears.
==================  =======================================================================

A :class:`Scenario` is a fleet, a span of simulated time and a corpus. Control periods are
every model's time away from its incidents, a share of the models is never touched (and
optionally the first ``control_days`` are incident-free for the whole fleet); incidents
touching the same model or the same upstream source never overlap (with a margin to
resolve), so each injected incident has exactly one right answer.

Examples
--------
>>> from service.sim.fleet import make_fleet
>>> sc = make_scenario(make_fleet(n_models=40, seed=2), days=3, seed=2, control_days=1)
>>> sorted({i.kind for i in sc.incidents}) == sorted(INCIDENT_KINDS)
True
>>> all(i.start >= sc.start + DAY for i in sc.incidents)
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from service.sim.fleet import (
    DAY,
    HOUR,
    KINDS,
    SIM_EPOCH,
    FeatureSpec,
    Fleet,
    ModelSpec,
)
from service.sim.magnitudes import magnitude_for_psi

COVARIATE_SHIFT = "covariate_shift"
BROKEN_FEATURE = "broken_feature"
UNIT_CHANGE = "unit_change"
CATEGORY_RENAME = "category_rename"
CATEGORY_FLOOD = "category_flood"
LINEAGE_BREAK = "lineage_break"
SCORE_DRIFT = "score_drift"
CONCEPT_DRIFT = "concept_drift"
VOLUME_DROP = "volume_drop"
INCIDENT_KINDS = (COVARIATE_SHIFT, BROKEN_FEATURE, UNIT_CHANGE, CATEGORY_RENAME, CATEGORY_FLOOD,
                  LINEAGE_BREAK, SCORE_DRIFT, CONCEPT_DRIFT, VOLUME_DROP)
FEATURE_KINDS = frozenset({COVARIATE_SHIFT, BROKEN_FEATURE, UNIT_CHANGE, CATEGORY_RENAME,
                           CATEGORY_FLOOD, LINEAGE_BREAK})

SCORE = "__score__"
PERFORMANCE = "__performance__"
VOLUME = ""
#: Model-level pseudo-features an incident legitimately moves (besides its features): a
#: model's score moves with its inputs, its performance with its inputs or its labels.
EXPLAINS: dict[str, frozenset[str]] = {
    **{k: frozenset({SCORE, PERFORMANCE}) for k in FEATURE_KINDS},
    SCORE_DRIFT: frozenset({SCORE, PERFORMANCE}),
    CONCEPT_DRIFT: frozenset({PERFORMANCE}),
    VOLUME_DROP: frozenset({VOLUME}),
}
FLOOD_CATEGORY = "__unknown_vendor__"
RENAME_SUFFIX = "_v2"
UNIT_FACTOR = 1000.0
#: Window margin around an incident inside which no other incident touches its models or
#: sources (k-of-m persistence and auto-resolve need a few healthy windows).
MARGIN_WINDOWS = 4


@dataclass(frozen=True)
class Incident:
    """One injected incident.

    Attributes
    ----------
    id : str
        ``"<kind>-<n>"``.
    kind : str
        One of :data:`INCIDENT_KINDS`.
    start, end : float
        Unix seconds of simulated time; active on ``[start, end)``.
    models : tuple of str
        Affected models.
    features : tuple of str
        Affected features (empty for model-level kinds).
    magnitude : float
        Kind-specific (see the module docstring).
    mode : str
        ``covariate_shift``: ``"location"`` or ``"scale"``.
    source : str or None
        ``lineage_break``: the source that breaks.
    psi : float or None
        ``covariate_shift``: the population PSI the shift is calibrated to
        (:func:`magnitude_for_psi`, within 1 %).
    """

    id: str
    kind: str
    start: float
    end: float
    models: tuple[str, ...]
    features: tuple[str, ...] = ()
    magnitude: float = 0.0
    mode: str = ""
    source: str | None = None
    psi: float | None = None

    def active(self, t: np.ndarray) -> np.ndarray:
        """Which event times fall in the incident."""
        return (t >= self.start) & (t < self.end)

    def overlaps(self, lo: float, hi: float) -> bool:
        """Does ``[lo, hi)`` meet ``[start, end)``?"""
        return lo < self.end and hi > self.start

    def explains(self, model_id: str, feature: str) -> bool:
        """Is an alert on ``(model_id, feature)`` a symptom of this incident (its model and one
        of its features, or a model-level signal its kind moves)?

        Examples
        --------
        >>> i = Incident("unit_change-0", UNIT_CHANGE, 0, 10, ("m1",), ("s.normal",), 1000.0)
        >>> i.explains("m1", "s.normal"), i.explains("m1", "__score__"), i.explains("m1", "")
        (True, True, False)
        >>> i.explains("m2", "s.normal")
        False
        """
        if model_id not in self.models:
            return False
        return feature in self.features or feature in EXPLAINS[self.kind]

    @property
    def sources(self) -> frozenset[str]:
        """Upstream sources of the affected features (``source.kind`` names)."""
        return frozenset(f.split(".", 1)[0] for f in self.features)


@dataclass(frozen=True)
class Scenario:
    """A fleet, a span of simulated time and the incidents injected into it.

    Attributes
    ----------
    fleet : Fleet
    start : int
        Unix seconds of the first simulated window.
    days : int
    window_seconds : int
    incidents : tuple of Incident
    control_days : int
        Leading days with no incident anywhere (0: none).
    seed : int
    reference_start : int
        Unix seconds of the incident-free day the reference profiles come from.
    """

    fleet: Fleet
    start: int
    days: int
    window_seconds: int
    incidents: tuple[Incident, ...]
    control_days: int = 0
    seed: int = 0
    reference_start: int = field(default=0)

    @property
    def end(self) -> int:
        return self.start + self.days * DAY

    def incidents_of(self, model_id: str) -> tuple[Incident, ...]:
        return tuple(i for i in self.incidents if model_id in i.models)

    def control_models(self) -> tuple[str, ...]:
        """Models no incident ever touches."""
        touched = {m for i in self.incidents for m in i.models}
        return tuple(m.model_id for m in self.fleet.models if m.model_id not in touched)


def top_categories(spec: FeatureSpec, share: float) -> tuple[str, ...]:
    """The most frequent categories whose base shares first add up to ``share`` or more.

    Examples
    --------
    >>> spec = FeatureSpec("s.c", "s", "cat_low", categories=("a", "b", "c"), probs=(0.2, 0.5, 0.3))
    >>> top_categories(spec, 0.4), top_categories(spec, 0.6)
    (('b',), ('b', 'c'))
    """
    order = np.argsort(spec.probs)[::-1]
    out, total = [], 0.0
    for i in order:
        out.append(spec.categories[int(i)])
        total += spec.probs[int(i)]
        if total >= share:
            break
    return tuple(out)


# -- the corpus ----------------------------------------------------------------------------
#: Incidents per kind per 200 models and 2 days with incidents (scaled by fleet size and days).
BASE_COUNTS = {COVARIATE_SHIFT: 12, BROKEN_FEATURE: 5, UNIT_CHANGE: 5, CATEGORY_RENAME: 5,
               CATEGORY_FLOOD: 5, LINEAGE_BREAK: 2, SCORE_DRIFT: 4, CONCEPT_DRIFT: 3,
               VOLUME_DROP: 3}
#: Covariate shifts (mode, population PSI): one below any sensible floor, then 0.25 to 1.
PSI_LADDER = (("location", 0.1), ("location", 0.25), ("scale", 0.25), ("location", 0.5),
              ("scale", 0.5), ("location", 1.0), ("scale", 1.0), ("location", 0.25),
              ("location", 0.5), ("location", 1.0), ("scale", 0.25), ("scale", 0.5))
LINEAGE_MODELS = 5
#: Covariate shifts of any corpus: the first three rungs of :data:`PSI_LADDER`.
MIN_COVARIATE_SHIFTS = 3
MIN_WINDOWS, MAX_WINDOWS = 4, 8  # incident duration, windows
ATTEMPTS = 80


@dataclass
class _Calendar:
    """Busy spans per model and per source (with margins)."""

    margin: float
    busy: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def free(self, keys: Iterable[str], lo: float, hi: float) -> bool:
        return all(not (lo - self.margin < b and hi + self.margin > a)
                   for k in keys for a, b in self.busy.get(k, ()))

    def book(self, keys: Iterable[str], lo: float, hi: float) -> None:
        for k in keys:
            self.busy.setdefault(k, []).append((lo, hi))


def _count(kind: str, n_models: int, incident_days: int) -> int:
    """Incidents of ``kind`` for a fleet of ``n_models`` over ``incident_days``: the default
    corpus's count scaled, at least one, and for covariate shifts at least three (the PSI
    ladder's 0.1, 0.25 location and 0.25 scale), so a fleet of one or ten models still
    measures shifts with PSI >= 0.25.

    Examples
    --------
    >>> _count(COVARIATE_SHIFT, 200, 2), _count(COVARIATE_SHIFT, 1, 2), _count(BROKEN_FEATURE, 1, 2)
    (12, 3, 1)
    """
    scale = n_models / 200 * incident_days / 2
    least = MIN_COVARIATE_SHIFTS if kind == COVARIATE_SHIFT else 1
    return max(least, round(BASE_COUNTS[kind] * scale))


def make_scenario(fleet: Fleet, days: int = 2, seed: int = 0, window_seconds: int = HOUR,
                  control_days: int = 0, control_share: float = 0.25,
                  start: int = SIM_EPOCH, counts: dict[str, int] | None = None) -> Scenario:
    """Schedule an incident corpus on a fleet.

    Parameters
    ----------
    fleet : Fleet
    days : int
        Simulated days, > ``control_days``.
    seed : int
    window_seconds : int
        The models' window (sets durations and margins).
    control_days : int
        Leading incident-free days for the whole fleet.
    control_share : float
        Share of models no incident touches.
    start : int
        Unix seconds of the first day (midnight UTC).
    counts : dict, optional
        Incidents per kind; default :data:`BASE_COUNTS` scaled by fleet size and days.

    Returns
    -------
    Scenario
        Incidents that could not be placed without overlapping another one on the same
        model or source are left out (so the corpus can be smaller than ``counts``).

    Raises
    ------
    ValueError
        If ``days <= control_days``.
    """
    if days <= control_days:
        raise ValueError("days must exceed control_days")
    rng = np.random.default_rng([seed, 0x1AC1])
    ids = [m.model_id for m in fleet.models]
    n_control = int(control_share * len(ids))
    controls = set(rng.choice(ids, size=n_control, replace=False).tolist()) if n_control else set()
    eligible = [m for m in fleet.models if m.model_id not in controls]
    # incidents start after two clean windows and end two windows before the scenario does
    t0, t1 = start + control_days * DAY + 2 * window_seconds, start + days * DAY
    cal = _Calendar(MARGIN_WINDOWS * window_seconds)
    wanted = counts or {k: _count(k, len(ids), days - control_days) for k in INCIDENT_KINDS}
    out: list[Incident] = []
    for kind in dict.fromkeys((LINEAGE_BREAK, *INCIDENT_KINDS)):  # lineage first: it needs most room
        for j in range(wanted.get(kind, 0)):
            for _attempt in range(ATTEMPTS):
                inc = _draw(kind, j, fleet, eligible, rng, t0, t1, window_seconds, cal.free)
                if inc is None:
                    continue
                keys = [*inc.models, *(f"source:{s}" for s in inc.sources)]
                if cal.free(keys, inc.start, inc.end):
                    cal.book(keys, inc.start, inc.end)
                    out.append(inc)
                    break
    out.sort(key=lambda i: (i.start, i.id))
    return Scenario(fleet=fleet, start=start, days=days, window_seconds=window_seconds,
                    incidents=tuple(out), control_days=control_days, seed=seed,
                    reference_start=start - DAY)


def _draw(kind: str, j: int, fleet: Fleet, eligible: list[ModelSpec], rng: np.random.Generator,
          t0: float, t1: float, window: int,
          free: Callable[[Iterable[str], float, float], bool]) -> Incident | None:
    """One candidate incident of ``kind`` (None: no candidate this time)."""
    duration = float(rng.integers(MIN_WINDOWS, MAX_WINDOWS + 1)) * window
    start = float(rng.uniform(t0, t1 - duration - 2 * window))
    start = start // 60 * 60  # on a simulated minute
    iid = f"{kind}-{j}"

    def pick(models: list[ModelSpec]) -> ModelSpec | None:
        return models[int(rng.integers(len(models)))] if models else None

    def feature_of(m: ModelSpec, kinds: Iterable[str]) -> FeatureSpec | None:
        ks = set(kinds)
        fs = [f for f in m.features if f.kind in ks]
        return fs[int(rng.integers(len(fs)))] if fs else None

    if kind == LINEAGE_BREAK:
        source = str(rng.choice(fleet.sources))
        readers = [m for m in eligible if source in m.sources]
        if not readers:
            return None
        chosen = [readers[int(i)] for i in rng.choice(len(readers), size=min(LINEAGE_MODELS, len(readers)),
                                                      replace=False)]
        feats = sorted({f.name for m in chosen for f in m.features if f.source == source})
        return Incident(iid, kind, start, start + duration, tuple(sorted(m.model_id for m in chosen)),
                        tuple(feats), float(rng.uniform(0.8, 1.0)), source=source)
    if kind in (SCORE_DRIFT, VOLUME_DROP, CONCEPT_DRIFT):
        pool = [m for m in eligible if m.tier == 1] if kind == CONCEPT_DRIFT else eligible
        m = pick(pool)
        if m is None:
            return None
        magnitude = {SCORE_DRIFT: float(rng.choice([-1, 1]) * rng.uniform(1.0, 2.0)),
                     VOLUME_DROP: float(rng.uniform(0.6, 0.9)), CONCEPT_DRIFT: 1.0}[kind]
        if kind == CONCEPT_DRIFT:  # labels arrive late: give the cohorts time to mature
            duration = float(MAX_WINDOWS * window)
        return Incident(iid, kind, start, start + duration, (m.model_id,), (), magnitude)
    m = pick(eligible)
    if m is None:
        return None
    if kind == COVARIATE_SHIFT:
        mode, target = PSI_LADDER[j % len(PSI_LADDER)]
        # A location shift of a Pareto feature moves its hard minimum: its PSI jumps with the
        # emptied lowest bin, too ill-conditioned for a ladder of PSI; its tail index is not.
        f = feature_of(m, ("normal", "lognormal", "discrete", "zero_inflated")
                       + (("pareto",) if mode == "scale" else ()))
        if f is None:
            return None
        if not free([m.model_id, f"source:{f.source}"], start, start + duration):
            return None  # checked first: the bisection below is the costly part
        magnitude = magnitude_for_psi(f, mode, target, seed=j)
        if magnitude is None:
            return None
        return Incident(iid, kind, start, start + duration, (m.model_id,), (f.name,),
                        round(magnitude, 4), mode=mode, psi=target)
    if kind == BROKEN_FEATURE:
        f = feature_of(m, KINDS)
        assert f is not None  # every model has every kind
        return Incident(iid, kind, start, start + duration, (m.model_id,), (f.name,),
                        float(rng.uniform(0.5, 1.0)))
    if kind == UNIT_CHANGE:
        f = feature_of(m, ("normal", "lognormal", "pareto", "zero_inflated"))
        assert f is not None  # every model has every kind
        return Incident(iid, kind, start, start + duration, (m.model_id,), (f.name,), UNIT_FACTOR)
    f = feature_of(m, ("cat_low", "cat_high"))
    assert f is not None  # every model has every kind
    if kind == CATEGORY_RENAME:  # the share of values that arrive renamed
        top = top_categories(f, float(rng.uniform(0.3, 0.6)))
        share = sum(p for c, p in zip(f.categories, f.probs, strict=True) if c in top)
    else:
        share = float(rng.uniform(0.2, 0.5))
    return Incident(iid, kind, start, start + duration, (m.model_id,), (f.name,), round(share, 3))
