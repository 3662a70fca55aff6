"""The fleet as the volume test's control: a model's share of the fleet's records.

Before a model has a past day of the same kind (its first day, its first weekend), its
volume test has no same-hour history to remove the daily rhythm with. The fleet has one:
the models of one organisation serve the same users' day, so a model's *share* of the
fleet's records moves far less over the day than its own count does. The control of a
model's window w is the set of the fleet's *other* models

- with records in w and in each of the :data:`~detectors.volume_history.FLEET_WINDOWS`
  windows before it that hold any of the fleet's records (a model that began or paused in
  between would move everyone's share), and
- moving with the fleet at w: its records in w over its trailing ones within
  :data:`BAND` of the median model's (a model in an incident of its own, even half the
  fleet in one, is not the denominator of the others' shares).

Its records per window are the denominators the model's trailing level is read through,
as through a daily shape (:func:`detectors.quality.volume.shaped_expectation` with the
trailing windows' relative rates ``F(t) / F(w)``). A model whose rhythm differs from the
fleet's has a share that wanders: the fleet's history then keeps too few of its windows
(:func:`detectors.quality.volume._trimmed`) and the trailing line answers.

A control is used only when, in every window, none of its models holds more than
:data:`MAX_SHARE` of its records: one control model's own incident (its traffic gone)
then moves everyone's share by at most a ninth, within the default volume floor of 0.3
(so a model with fewer than 10 comparable others has no control). A whole fleet that
loses traffic together keeps every share: the fleet cannot see it, the models' own lines
can (their first windows). Pure; the reads are the detector's.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: The largest share of a control's records one of its models may hold, in any window.
MAX_SHARE = 0.1
#: How far a control model's change at the window judged may stray from the median
#: model's (relative) and it still moves with the fleet: the default volume floor.
BAND = 0.3
#: The largest record count a traffic hash may hold for one model's window (larger: it
#: does not read back, and is left out).
MAX_RECORDS = 10**12


@dataclass(frozen=True)
class FleetTraffic:
    """The records of the fleet's models with traffic in every window of a span.

    Attributes
    ----------
    starts : tuple of int
        The span's window starts (Unix seconds), oldest first; the window judged last.
    models : tuple of str
        The models with records in every window of the span, sorted.
    counts : numpy.ndarray
        int64, shape (len(models), len(starts)): their records per window.
    moving : numpy.ndarray
        bool, shape (len(models),): the model moves with the fleet at the last window
        (its change within :data:`BAND` of the median model's).
    """

    starts: tuple[int, ...]
    models: tuple[str, ...]
    counts: np.ndarray
    moving: np.ndarray

    @classmethod
    def of(cls, starts: Sequence[int], windows: Sequence[Mapping[str, int]]) -> FleetTraffic:
        """The traffic of ``windows[i]`` (records per model of the window at ``starts[i]``,
        model versions summed). A window with no records at all (before the fleet's
        first) is left out of the span.

        Examples
        --------
        >>> t = FleetTraffic.of([0, 60, 120], [{}, {"a": 5, "b": 7, "c": 1}, {"a": 6, "b": 8}])
        >>> t.starts, t.models, t.counts.tolist(), t.moving.tolist()
        ((60, 120), ('a', 'b'), [[5, 6], [7, 8]], [True, True])
        """
        kept = [(int(s), w) for s, w in zip(starts, windows, strict=True) if any(n > 0 for n in w.values())]
        spans = [s for s, _w in kept]
        common = set(kept[0][1]) if kept else set()
        for _s, w in kept[1:]:
            common &= w.keys()
        models = tuple(sorted(m for m in common if all(w[m] > 0 for _s, w in kept)))
        counts = np.array([[w[m] for _s, w in kept] for m in models], dtype=np.int64)
        counts = counts.reshape(len(models), len(kept))
        moving = np.ones(len(models), dtype=bool)
        if len(kept) > 1 and models:
            change = counts[:, -1] / counts[:, :-1].sum(axis=1)
            moving = np.abs(change / np.median(change) - 1) <= BAND
        return cls(tuple(spans), models, counts, moving)

    def without(self, model_id: str) -> FleetRates | str:
        """The control of model ``model_id`` (the models moving with the fleet, itself left
        out), or why there is none.

        Examples
        --------
        >>> t = FleetTraffic.of([0, 60], [{f"m{i}": 100 + i for i in range(12)}] * 2)
        >>> t.without("m0").totals, t.without("m0").models
        ((1166, 1166), 11)
        >>> FleetTraffic.of([0, 60], [{"x": 600, "y": 500, "z": 10}] * 2).without("z")
        'the largest of 2 comparable models holds 55 % of their records in a window (at most 10 %)'
        """
        rows = self.moving.copy()
        i = bisect_left(self.models, model_id)  # the models are sorted
        if i < len(self.models) and self.models[i] == model_id:
            rows[i] = False
        counts = self.counts[rows]
        models = int(rows.sum())
        totals = counts.sum(axis=0)
        if models == 0 or int(totals.min()) <= 0:
            return "no other model moving with the fleet has records in each of these windows"
        largest = float((counts.max(axis=0) / totals).max())
        if largest > MAX_SHARE:
            return (f"the largest of {models} comparable models holds {100 * largest:.0f} % of their "
                    f"records in a window (at most {100 * MAX_SHARE:.0f} %)")
        return FleetRates(self.starts, tuple(int(t) for t in totals), models)


@dataclass(frozen=True)
class FleetRates:
    """The records of one model's control per window (:meth:`FleetTraffic.without`)."""

    starts: tuple[int, ...]
    totals: tuple[int, ...]
    models: int

    def relative(self, starts: Sequence[int], window_start: int) -> tuple[tuple[float, ...], float]:
        """Each of ``starts``' control records over the window at ``window_start``'s, and
        the variance of the log of the level's ratio: the control's records are Poisson,
        so Var(log(F(w) / sum F(t))) = 1 / F(w) + 1 / sum F(t) (delta method).

        Raises
        ------
        KeyError
            A start outside the control's span.

        Examples
        --------
        >>> r = FleetRates((0, 60, 120), (500, 800, 1000), 20)
        >>> r.relative([0, 60], 120)
        ((0.5, 0.8), 0.0017692307692307693)
        """
        by_start = dict(zip(self.starts, self.totals, strict=True))
        now = by_start[window_start]
        past = [by_start[s] for s in starts]
        return tuple(p / now for p in past), 1 / now + 1 / sum(past)
