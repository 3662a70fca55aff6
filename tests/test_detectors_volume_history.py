"""The volume test's history before a week of it exists (detectors/volume_history.py,
detectors/quality/volume.py): the same hour on past days of the same kind, else the line
through the trailing windows of the same kind of day; which one answered is in the
result's reason; the weekly rhythm is never compared across."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import numpy as np
import pytest

from detectors.catalog import DEFAULT_FLOORS
from detectors.quality.volume import VolumeHistory, trend_expectation, volume_test
from detectors.result import Status
from detectors.volume_history import plan_volume, volume_history
from detectors.volume_shape import DailyShape, ShapeFit
from sketches.window import WindowGrid

HOUR, DAY = 3_600, 86_400
FRIDAY = 1_704_412_800  # 2024-01-05 00:00 UTC, the simulator's first day
FLOOR = DEFAULT_FLOORS["volume"]


def rhythm(t: float) -> float:
    """The simulator's volume rhythm: a daily wave (x0.6 at 02:00 to x1.4 at 14:00 UTC),
    x0.8 on weekends (service/sim/sampling.py)."""
    h = (t % DAY) / HOUR
    weekend = (int(t // DAY) + 3) % 7 >= 5  # 1970-01-01 was a Thursday
    return (1 + 0.4 * np.sin(2 * np.pi * (h - 14 + 6) / 24)) * (0.8 if weekend else 1.0)


def traffic(rng: np.random.Generator, rate: float, starts: list[int], drop: set[int] = frozenset(),
            magnitude: float = 0.0) -> dict[int, int]:
    return {s: int(rng.poisson(rate * rhythm(s + HOUR / 2) * (1 - magnitude if s in drop else 1)))
            for s in starts}


def judge(t: int, past: dict[int, int], count: int, grid: WindowGrid | None = None):
    plan = plan_volume(t, HOUR, grid)
    history = volume_history(plan, t, HOUR, [], {s: c for s, c in past.items() if s < t}, grid)
    return history, volume_test(count, history, floor=FLOOR)


def test_a_drop_on_day_two_with_only_day_one_of_history_is_judged():
    """Tuesday 10:00 with Monday as the only past: the same hour yesterday answers (before,
    no past week: insufficient_data), and a 70 % drop is a drift."""
    monday = FRIDAY + 3 * DAY
    rng = np.random.default_rng(0)
    past = traffic(rng, 300, [monday + k * HOUR for k in range(34)])
    t = monday + DAY + 10 * HOUR
    history, result = judge(t, past, int(300 * rhythm(t) * 0.3))
    assert history.source == "daily" and history.counts == (past[monday + 10 * HOUR],)
    assert result.status == Status.DRIFT and result.effect_size < -0.6
    assert "daily history" in result.reason and "1 past weekday" in result.reason
    assert volume_test(int(300 * rhythm(t)), history, floor=FLOOR).status == Status.OK


def test_the_first_day_uses_the_line_through_its_trailing_windows():
    """Friday, the model's first day: a drop at 10:00 (against 02:00-09:00 rising with the
    daily wave) is found, and so is the window after it (the dropped window is out of line
    and left out, not taken as the new level)."""
    rng = np.random.default_rng(1)
    starts = [FRIDAY + k * HOUR for k in range(13)]
    drop = {FRIDAY + 10 * HOUR, FRIDAY + 11 * HOUR}
    past = traffic(rng, 300, starts, drop, magnitude=0.8)
    for t in sorted(drop):
        history, result = judge(t, past, past[t])
        assert history.source == "trailing", history
        assert result.status == Status.DRIFT and result.p_value < 1e-6, result
    history, result = judge(FRIDAY + 11 * HOUR, past, past[FRIDAY + 11 * HOUR])
    assert "1 out of line left out" in result.reason
    assert judge(FRIDAY + 3 * HOUR, past, past[FRIDAY + 3 * HOUR])[0].source == "none"


def test_the_weekly_rhythm_and_the_daily_wave_do_not_page():
    """Two clean days starting on a Friday, 200 models: no window is out of line at a
    level anywhere near a gate's (the Friday -> Saturday step is never compared across:
    Saturday's first hours have no history of their own kind)."""
    rng = np.random.default_rng(2)
    starts = [FRIDAY + k * HOUR for k in range(48)]
    smallest, sources = 1.0, set()
    for _model in range(200):
        past = traffic(rng, 300 * rng.uniform(0.6, 1.6), starts)
        for t in starts[1:]:
            history, result = judge(t, past, past[t])
            sources.add(history.source)
            if result.p_value is not None:
                smallest = min(smallest, result.p_value)
    assert sources == {"trailing", "none"}  # no past day of Saturday's kind in two days
    assert smallest > 1e-3


def test_saturday_is_compared_with_saturday_not_friday():
    """A Saturday with past weekdays and a past Sunday: the Sunday answers (a weekend
    day), not yesterday (a Friday); a Sunday has Saturday."""
    rng = np.random.default_rng(3)
    past = traffic(rng, 300, [FRIDAY - 6 * DAY + k * HOUR for k in range(7 * 24)])
    t = FRIDAY + DAY + 10 * HOUR  # Saturday 2024-01-06; Saturday 2023-12-30 is 7 days back
    history = volume_history(plan_volume(t, HOUR), t, HOUR, [], past)
    assert history.source == "daily" and history.counts == (past[t - 6 * DAY],)  # Sunday 12-31
    past = traffic(rng, 300, [FRIDAY - 2 * DAY + k * HOUR for k in range(4 * 24)])  # Wed -> Sat
    t = FRIDAY + 2 * DAY + 10 * HOUR  # Sunday 2024-01-07
    history = volume_history(plan_volume(t, HOUR), t, HOUR, [], past)
    assert history.source == "daily" and history.counts == (past[t - DAY],)
    assert "1 past weekend day" in history.note


def test_local_days_decide_the_kind_of_day():
    """On a grid in Asia/Tokyo (UTC+9), 2024-01-05 20:00 UTC is Saturday 05:00 local: its
    kind is the weekend's, and Friday 05:00 local (a day back) is not compared with it."""
    grid = WindowGrid(HOUR, 0, ZoneInfo("Asia/Tokyo"))
    t = FRIDAY + 20 * HOUR
    past = {t - k * HOUR: 300 for k in range(1, 30)}
    history = volume_history(plan_volume(t, HOUR, grid), t, HOUR, [], past, grid)
    assert history.source == "trailing" and len(history.counts) == 5  # Saturday 00:00-04:00 local
    utc = volume_history(plan_volume(t, HOUR), t, HOUR, [], past)
    assert utc.source == "daily"  # in UTC it is a Friday, with Thursday behind it


def test_windows_longer_than_a_day_use_the_trailing_line():
    """Two-day windows have no daily slot: the line through the previous windows."""
    t = FRIDAY + 20 * DAY
    past = {t - k * 2 * DAY: 1000 + 10 * k for k in range(1, 6)}
    plan = plan_volume(t, 2 * DAY)
    assert plan.daily == ()
    history = volume_history(plan, t, 2 * DAY, [], past)
    assert history.source == "trailing" and len(history.counts) == 5
    assert volume_test(300, history, floor=FLOOR).status == Status.DRIFT


def test_trend_dispersion_is_the_fit_s_and_never_below_poisson():
    """A history scattered around its line raises phi above 1 (a wider interval); a
    perfectly straight one keeps the Poisson variance."""
    xs = [-8.0, -7, -6, -5, -4, -3, -2, -1]
    straight = trend_expectation(xs, [200] * 8, 0.0, FLOOR)
    noisy = trend_expectation(xs, [200, 250, 160, 240, 170, 230, 180, 210], 0.0, FLOOR)
    assert straight.variance == 200 * (1 + 1 / 8 + 4.5**2 / 42)
    assert noisy.variance > 3 * straight.variance
    assert VolumeHistory("none", note="x").expectation(FLOOR) is None


def reference_shape(rng: np.random.Generator, rows: int, day: int = FRIDAY - DAY) -> ShapeFit:
    """The daily shape of ``rows`` reference rows drawn over ``day`` with the rhythm."""
    minutes = day + np.arange(0, DAY, 60.0)
    rate = np.array([rhythm(t) for t in minutes])
    times = rng.choice(minutes, size=rows, p=rate / rate.sum()) + rng.uniform(0, 60, rows)
    return DailyShape.of_times(times, None).fit


def test_a_morning_drop_on_the_first_day_is_found_through_the_reference_s_daily_shape():
    """Friday 07:00 and 08:00 of a model's first day, after the night trough, 73 % of the
    traffic gone (the simulator's sim-002): the line through the trailing windows bends the
    wrong way and reads p ~ 10^-3 to 10^-2; the same windows' level read through the
    shape of a Thursday reference of 20,000 rows reads it far below, in every one of 7
    draws of the traffic (a median below 10^-8), and leaves the dropped window out of the
    next one's level."""
    ratios, shaped_ps = [], []
    drop = {FRIDAY + 7 * HOUR, FRIDAY + 8 * HOUR}
    for seed in range(7):
        rng = np.random.default_rng(seed)
        past = traffic(rng, 300, [FRIDAY + k * HOUR for k in range(9)], drop, magnitude=0.73)
        shape = reference_shape(rng, 20_000)
        for t in sorted(drop):
            earlier = {s: c for s, c in past.items() if s < t}
            line = volume_history(plan_volume(t, HOUR), t, HOUR, [], earlier)
            shaped = volume_history(plan_volume(t, HOUR), t, HOUR, [], earlier, shape=shape)
            assert shaped.source == "shaped" and line.source == "trailing"
            by_shape = volume_test(past[t], shaped, floor=FLOOR)
            assert by_shape.status == Status.DRIFT, by_shape
            assert "through the reference's daily shape" in by_shape.reason
            shaped_ps.append(by_shape.p_value)
            ratios.append(volume_test(past[t], line, floor=FLOOR).p_value / by_shape.p_value)
            if t == FRIDAY + 8 * HOUR:
                assert "1 out of line left out" in by_shape.reason
    assert min(ratios) > 10 and float(np.median(shaped_ps)) < 1e-8, (ratios, shaped_ps)


def test_the_daily_shape_pages_for_no_rhythm():
    """Two clean days from a Friday, 200 models with a reference shape each (2,000 rows):
    no window reads a p-value near a gate's level; where 4 same-kind trailing windows
    exist, the shape or the line answers, whichever has the smaller variance (both are
    seen: a reference of 2,000 rows knows a steep hour's share less well than the line)."""
    rng = np.random.default_rng(6)
    starts = [FRIDAY + k * HOUR for k in range(48)]
    smallest, sources, answered = 1.0, set(), set()
    for _model in range(200):
        shape = reference_shape(rng, 2_000)
        past = traffic(rng, 300 * rng.uniform(0.6, 1.6), starts)
        for t in starts[1:]:
            history = volume_history(plan_volume(t, HOUR), t, HOUR, [],
                                     {s: c for s, c in past.items() if s < t}, shape=shape)
            sources.add(history.source)
            result = volume_test(past[t], history, floor=FLOOR)
            if result.p_value is not None:
                smallest = min(smallest, result.p_value)
                answered.add(result.reason.split(" history")[0].split()[-1])
    assert sources == {"shaped", "none"} and answered == {"shaped", "trailing"}
    assert smallest > 1e-3


def test_a_shape_needs_a_whole_day_of_enough_rows():
    """Rows over half a day, or too few rows, teach no shape (and say why); a merge of
    two half days does."""
    rng = np.random.default_rng(7)
    morning = rng.uniform(FRIDAY, FRIDAY + DAY / 2, 1_000)
    evening = rng.uniform(FRIDAY + DAY / 2, FRIDAY + DAY, 1_000)
    half = DailyShape.of_times(morning, None)
    assert half.fit is None and "do not cover a whole day" in half.missing
    assert DailyShape.of_times(rng.uniform(FRIDAY, FRIDAY + DAY, 50), None).fit is None
    whole = half.merged(DailyShape.of_times(evening, None))
    assert whole.fit is not None and whole.rows == 2_000
    assert DailyShape.from_dict(whole.to_dict()) == whole


def test_a_shape_that_is_no_smooth_curve_or_does_not_read_back_is_refused():
    """A day whose rows all fall in one bin (a nightly batch) fits no curve, and says so;
    stored shapes with other bins, negative or non-finite counts or an unknown zone do
    not read back."""
    batch = DailyShape((1e6,) + (0.0,) * 95, (1.0,) * 96)
    assert batch.fit is None and "no smooth daily curve" in batch.missing
    good = DailyShape.of_times(np.random.default_rng(9).uniform(FRIDAY, FRIDAY + DAY, 1_000), None)
    assert good.fit is not None and good.fit.dispersion < 2
    for bad in ({**good.to_dict(), "counts": good.counts[:-1]},
                {**good.to_dict(), "counts": [-1.0, *good.counts[1:]]},
                {**good.to_dict(), "exposure": [float("nan"), *good.exposure[1:]]},
                {**good.to_dict(), "zone": "Mars/Olympus"}):
        with pytest.raises(ValueError):
            DailyShape.from_dict(bad)


def test_a_stray_row_does_not_make_a_half_day_a_whole_one():
    """12 hours of rows and one row two months earlier: the days between hold no row, so
    they are not covered (a gap over 6 hours ends a stretch) and no shape is learned; a
    time in the last hours of year 9999 in a zone ahead of UTC is counted, not an error."""
    rng = np.random.default_rng(10)
    day = rng.uniform(FRIDAY + 8 * HOUR, FRIDAY + 20 * HOUR, 2_000)
    stray = DailyShape.of_times(np.append(day, FRIDAY - 61 * DAY), None)
    assert stray.fit is None and "do not cover a whole day" in stray.missing
    late = DailyShape.of_times(np.array([253_402_300_799.0]), ZoneInfo("Asia/Kathmandu"))
    assert late.rows == 1 and late.zone == "Asia/Kathmandu"


def test_stored_shapes_out_of_range_do_not_read_back():
    """Counts beyond 10^12 (an integer of 400 digits, 1e308), bools, strings and mappings of
    96 keys are refused, as the zone of another model is reported as unusable."""
    good = DailyShape.of_times(np.random.default_rng(11).uniform(FRIDAY, FRIDAY + DAY, 1_000), None)
    for counts in ([10**400, *good.counts[1:]], [1e308] * 96, [True] * 96, "1" * 96,
                   {str(i): 1 for i in range(96)}):
        with pytest.raises(ValueError):
            DailyShape.from_dict({**good.to_dict(), "counts": counts})
    assert good.unusable(None) is None
    assert "while the model's windows are in Asia/Tokyo" in good.unusable("Asia/Tokyo")


@pytest.mark.parametrize("ratio", [0.7, 1.3])
def test_a_count_at_the_null_boundary_breaches_at_the_tests_level(ratio):
    """A count whose mean sits on the interval null's boundary (a 30 % drop or rise against
    the 0.3 floor) breaches at alpha 0.05 about 5 % of the time, for drops and rises alike:
    the variance is taken at the boundary (VolumeExpectation.at_boundary). Taken at the
    expectation, drops read 1.2 % and rises 7.4 % (4,000 draws, 4 past windows of 200)."""
    rng = np.random.default_rng(7)
    breaches = sum(volume_test(int(rng.poisson(ratio * 200)), rng.poisson(200, 4).tolist(),
                               floor=0.3).p_value <= 0.05 for _ in range(4_000))
    assert 0.025 <= breaches / 4_000 <= 0.06
