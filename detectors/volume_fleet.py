"""The fleet as the volume test's control: a model's share of the fleet's records.

Before a model has a past day of the same kind (its first day, its first weekend), its
volume test has no same-hour history to remove the daily rhythm with. The fleet has one:
the models of one organisation serve the same users' day, so a model's *share* of the
fleet's records moves far less over the day than its own count does. The control of a
window is the set of the fleet's models with records in it and in each of the
:data:`~detectors.volume_history.FLEET_WINDOWS` windows before it that hold any of the
fleet's records (a model that began or paused in between would move everyone's share),
the model judged left out. Its records
per window are the denominators the model's trailing level is read through, as through
a daily shape (:func:`detectors.quality.volume.shaped_expectation` with the trailing
windows' relative rates ``F(t) / F(w)``). A model whose rhythm differs from the fleet's
(another time zone, another kind of user) has a share that wanders: its dispersion
grows and the trailing line answers instead, whichever is the more precise.

A control is used only when none of its models holds more than :data:`MAX_SHARE` of its
records: one control model's own incident (its traffic gone) then moves everyone's share
by at most a ninth, within the default volume floor of 0.3 (so a model with fewer than 10
comparable others has no control). Pure; the reads are the detector's.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The largest share of a control's records one of its models may hold.
MAX_SHARE = 0.1
#: The largest models a control keeps apart, so that one of them can be left out (the
#: model judged) and the share rule still be checked.
TOP = 2


@dataclass(frozen=True)
class FleetControl:
    """The records of the fleet's models with traffic in every window of a span.

    Attributes
    ----------
    starts : tuple of int
        The span's window starts (Unix seconds), oldest first; the window judged last.
    totals : tuple of int
        Records of the span's models, per window of ``starts``.
    models : int
        How many models (with records in every window of the span).
    top : tuple of (str, int)
        The :data:`TOP` largest of them and their records over the span, largest first.
    """

    starts: tuple[int, ...]
    totals: tuple[int, ...]
    models: int
    top: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, starts: Sequence[int], windows: Sequence[Mapping[str, int]]) -> FleetControl:
        """The control of ``windows[i]`` (records per model of the window at ``starts[i]``,
        model versions summed).

        Examples
        --------
        A window with no records at all (before the fleet's first) is left out of the span:

        >>> c = FleetControl.of([0, 60, 120], [{}, {"a": 5, "b": 7, "c": 1}, {"a": 6, "b": 8}])
        >>> c.starts, c.totals, c.models, c.top
        ((60, 120), (12, 14), 2, (('b', 15), ('a', 11)))
        """
        kept = [(s, w) for s, w in zip(starts, windows, strict=True) if any(n > 0 for n in w.values())]
        starts, windows = [s for s, _w in kept], [w for _s, w in kept]
        common = set(windows[0]) if windows else set()
        for w in windows[1:]:
            common &= w.keys()
        common = {m for m in common if all(w[m] > 0 for w in windows)}
        per_model = {m: sum(w[m] for w in windows) for m in common}
        top = heapq.nlargest(TOP, per_model.items(), key=lambda kv: (kv[1], kv[0]))
        return cls(tuple(int(s) for s in starts), tuple(sum(w[m] for m in common) for w in windows),
                   len(common), tuple((m, int(n)) for m, n in top))

    def without(self, model_id: str, own: Mapping[int, int]) -> FleetRates | str:
        """The control of model ``model_id`` (its own records ``own`` per window start left
        out when it is one of the span's models), or why there is none.

        Examples
        --------
        >>> c = FleetControl((0, 60), (1000, 1100), 12, (("x", 150), ("y", 140)))
        >>> c.without("m", {0: 10, 60: 11}).totals, c.without("m", {60: 11}).totals
        ((990, 1089), (1000, 1100))
        >>> FleetControl((0, 60), (1000, 1100), 3, (("x", 600), ("y", 500))).without("z", {})
        'the largest of 3 comparable models holds 29 % of their records (at most 10 %)'
        """
        mine = [own.get(s, 0) for s in self.starts]
        member = all(n > 0 for n in mine)
        totals = tuple(t - n for t, n in zip(self.totals, mine, strict=True)) if member else self.totals
        models = self.models - member
        largest = next((n for m, n in self.top if m != model_id), 0)
        records = sum(totals)
        if models == 0 or records <= 0:
            return "no other model has records in each of these windows"
        if largest > MAX_SHARE * records:
            return (f"the largest of {models} comparable models holds {100 * largest / records:.0f} % of "
                    f"their records (at most {100 * MAX_SHARE:.0f} %)")
        return FleetRates(self.starts, totals, models)

    def to_dict(self) -> dict[str, object]:
        return {"starts": list(self.starts), "totals": list(self.totals), "models": self.models,
                "top": [list(t) for t in self.top]}

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> FleetControl:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        ValueError
            If ``d`` is not one (lengths that differ, negative counts).
        """
        starts, totals, top = d["starts"], d["totals"], d["top"]
        if not (isinstance(starts, list) and isinstance(totals, list) and isinstance(top, list)):
            raise ValueError("a fleet control holds lists of starts, totals and top models")
        c = cls(tuple(int(s) for s in starts), tuple(int(t) for t in totals), int(d["models"]),  # type: ignore[call-overload]
                tuple((str(m), int(n)) for m, n in top))
        if len(c.starts) != len(c.totals) or min(c.totals, default=0) < 0 or c.models < 0:
            raise ValueError("a fleet control's starts and totals differ in length, or a count is negative")
        return c


@dataclass(frozen=True)
class FleetRates:
    """The records of one model's control per window (:meth:`FleetControl.without`)."""

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
