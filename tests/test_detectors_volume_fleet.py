"""The fleet control's rules (detectors/volume_fleet.py): which models it holds, when a
model judged is left out of it, and what reads back from storage."""

from __future__ import annotations

import pytest

from detectors.volume_fleet import FleetControl, FleetRates


def test_a_model_that_began_or_paused_within_the_span_is_not_in_the_control():
    windows = [{"a": 100, "b": 100, "late": 0}, {"a": 110, "b": 90, "late": 500, "new": 900},
               {"a": 120, "b": 80, "late": 400, "new": 800}]
    c = FleetControl.of([0, 60, 120], windows)
    assert c.models == 2 and c.totals == (200, 200, 200)
    assert [m for m, _n in c.top] == ["a", "b"]


def test_the_judged_model_is_left_out_only_when_it_is_one_of_the_controls_models():
    windows = [{f"m{i}": 100 + i for i in range(12)} for _ in range(3)]
    c = FleetControl.of([0, 60, 120], windows)
    mine = c.without("m0", {0: 100, 60: 100, 120: 100})
    assert isinstance(mine, FleetRates) and mine.models == 11
    assert mine.totals == tuple(t - 100 for t in c.totals)
    # a model with a window missing from the span was never counted in it
    outsider = c.without("x", {0: 100, 120: 100})
    assert isinstance(outsider, FleetRates) and outsider.totals == c.totals and outsider.models == 12


def test_a_control_dominated_by_one_model_is_refused_but_not_once_that_model_is_left_out():
    windows = [{"big": 1_000, **{f"m{i}": 100 for i in range(12)}} for _ in range(2)]
    c = FleetControl.of([0, 60], windows)
    assert isinstance(c.without("m0", {0: 100, 60: 100}), str)  # big holds 1000 / 2100 of it
    rates = c.without("big", {0: 1_000, 60: 1_000})
    assert isinstance(rates, FleetRates) and rates.models == 12 and rates.totals == (1_200, 1_200)


def test_a_control_reads_back_and_a_damaged_one_is_refused():
    c = FleetControl.of([0, 60], [{"a": 5, "b": 7}, {"a": 6, "b": 8}])
    assert FleetControl.from_dict(c.to_dict()) == c
    for bad in ({**c.to_dict(), "totals": [1]}, {**c.to_dict(), "totals": [-1, 2]},
                {**c.to_dict(), "starts": "0,60"}, {**c.to_dict(), "models": "many"}):
        with pytest.raises((ValueError, TypeError)):
            FleetControl.from_dict(bad)
    with pytest.raises(KeyError):
        FleetControl.from_dict({"starts": [0]})
