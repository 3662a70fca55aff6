"""The fleet control's rules (detectors/volume_fleet.py): which models it holds, the model
judged left out, models in an incident of their own left out, and the share rule."""

from __future__ import annotations

from detectors.volume_fleet import MAX_SHARE, FleetRates, FleetTraffic


def test_a_model_that_began_or_paused_within_the_span_is_not_in_the_control():
    windows = [{"a": 100, "b": 100, "late": 0}, {"a": 110, "b": 90, "late": 500, "new": 900},
               {"a": 120, "b": 80, "late": 400, "new": 800}]
    t = FleetTraffic.of([0, 60, 120], windows)
    assert t.models == ("a", "b") and t.counts.sum(axis=0).tolist() == [200, 200, 200]


def test_the_judged_model_is_left_out_of_its_own_control():
    windows = [{f"m{i}": 100 + i for i in range(12)} for _ in range(3)]
    t = FleetTraffic.of([0, 60, 120], windows)
    mine, other = t.without("m0"), t.without("zz")
    assert isinstance(mine, FleetRates) and isinstance(other, FleetRates)
    assert mine.models == 11 and other.models == 12
    assert mine.totals == tuple(x - 100 for x in other.totals)


def test_models_in_an_incident_of_their_own_are_not_the_denominator():
    """A third of the fleet loses 70 % of its traffic at the last window: the others' control
    is the models that did not, so their shares do not read as rises."""
    windows = [{f"m{i}": 200 for i in range(30)} for _ in range(4)]
    windows[-1] = {f"m{i}": 60 if i < 10 else 200 for i in range(30)}
    t = FleetTraffic.of([0, 60, 120, 180], windows)
    assert dict(zip(t.models, t.moving.tolist(), strict=True)) == {f"m{i}": i >= 10 for i in range(30)}
    rates = t.without("m15")
    assert isinstance(rates, FleetRates) and rates.models == 19 and len(set(rates.totals)) == 1


def test_a_control_dominated_by_one_model_in_any_window_is_refused():
    windows = [{"batch": 100, **{f"m{i}": 100 for i in range(12)}} for _ in range(3)]
    windows[1]["batch"], windows[2]["batch"] = 400, 200  # over a quarter of window 1
    t = FleetTraffic.of([0, 60, 120], windows)
    assert "holds 27 % of their records in a window" in t.without("m0")  # 400 of 1,500
    left = t.without("batch")
    assert isinstance(left, FleetRates) and left.models == 12 and MAX_SHARE >= 100 / 1_200
