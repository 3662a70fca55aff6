"""Window alignment: the Unix epoch by default (7-day windows start on Thursdays), ISO
weeks (Monday 00:00 UTC) when a model asks for them, and local calendar days in a model's
time zone (23 h and 25 h on DST days)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from pydantic import ValidationError

from detectors.baseline import seasonal_ranges
from detectors.fdr.epoch import EpochSpending
from sdk.columns import RecordColumns
from sdk.record import PredictionRecord
from service.cohorts.predictions import predictions_of
from service.registry import ModelConfig, PerformanceConfig
from sketches.window import DAY, ISO_WEEK_ORIGIN, MAX_CALENDAR_TIME, WindowGrid, window_starts

WEEK = 7 * 86_400


def utc(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, dt.UTC)


def test_week_windows_start_on_thursday_by_default_and_on_monday_as_iso_weeks():
    rng = np.random.default_rng(0)
    t = rng.uniform(0, 2_000_000_000, 5_000)
    t[:3] = [ISO_WEEK_ORIGIN, ISO_WEEK_ORIGIN - 0.5, 1_700_000_000.0]  # edges, a Tuesday
    epoch, iso = window_starts(t, WEEK), window_starts(t, WEEK, ISO_WEEK_ORIGIN)
    for ti, e, i in zip(t.tolist(), epoch.tolist(), iso.tolist(), strict=True):
        assert e <= ti < e + WEEK and i <= ti < i + WEEK
        assert utc(e).strftime("%a %H:%M:%S") == "Thu 00:00:00"
        day = utc(ti).date()  # independent reference: the Monday of the ISO week
        monday = day - dt.timedelta(days=day.isocalendar().weekday - 1)
        assert utc(i) == dt.datetime(monday.year, monday.month, monday.day, tzinfo=dt.UTC)
    # Windows dividing a day are the same from either origin.
    assert (window_starts(t, 300) == window_starts(t, 300, ISO_WEEK_ORIGIN)).all()


def test_model_config_alignment():
    assert ModelConfig().window_origin == 0
    assert ModelConfig(window_seconds=WEEK, window_alignment="iso_week").window_origin == ISO_WEEK_ORIGIN
    with pytest.raises(ValidationError, match="window_alignment"):
        ModelConfig(window_alignment="sunday")


# -- day windows in a time zone -------------------------------------------------------------

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Sao_Paulo",
         "Asia/Kolkata", "Pacific/Apia", "Pacific/Kiritimati", "UTC"]


def local_date(t: float, tz: ZoneInfo) -> dt.date:
    return dt.datetime.fromtimestamp(t, tz).date()


@pytest.mark.parametrize("zone", ZONES)
def test_local_day_windows_are_the_zones_calendar_days(zone):
    # Independent of how the grid computes them: a record's window is the stretch of time
    # whose local date is the record's -- it starts at the first instant of that date
    # (the second before is the day before) and ends at the first instant of a later one.
    tz = ZoneInfo(zone)
    rng = np.random.default_rng(21)
    t = rng.uniform(1_230_000_000, 1_800_000_000, 4_000)  # 2008 .. 2027
    grid = WindowGrid(DAY, 0, tz)
    starts, lengths = grid.assign(t)
    for ti, s, n in zip(t.tolist(), starts.tolist(), lengths.tolist(), strict=True):
        d = local_date(ti, tz)
        assert s <= ti < s + n
        assert local_date(s, tz) == d and local_date(s - 1, tz) < d
        assert local_date(s + n - 1, tz) == d and local_date(s + n, tz) > d
    # Records one at a time land where a batch puts them.
    assert [grid.window_at(ti) for ti in t[:50].tolist()] == list(
        zip(starts[:50].tolist(), lengths[:50].tolist(), strict=True))


@pytest.mark.parametrize(("zone", "short", "long"), [
    ("Europe/Berlin", dt.date(2024, 3, 31), dt.date(2024, 10, 27)),
    ("America/New_York", dt.date(2024, 3, 10), dt.date(2024, 11, 3)),
])
def test_dst_days_are_23_and_25_hours(zone, short, long):
    tz = ZoneInfo(zone)
    grid = WindowGrid(DAY, 0, tz)
    day = dt.date(2024, 1, 1)
    seen = {}
    while day.year == 2024:
        noon = dt.datetime(day.year, day.month, day.day, 12, tzinfo=tz).timestamp()
        start, length = grid.window_at(noon)
        assert grid.local(start).replace(tzinfo=None) == dt.datetime(day.year, day.month, day.day)
        seen[day] = length
        day += dt.timedelta(days=1)
    assert seen.pop(short) == 23 * 3_600 and seen.pop(long) == 25 * 3_600
    assert set(seen.values()) == {DAY}  # every other day of the year


def test_a_day_the_zone_skipped_and_half_hour_changes():
    # Samoa skipped 2011-12-30 (from UTC-10 to UTC+14): the 29th is followed by the 31st.
    apia = WindowGrid(DAY, 0, ZoneInfo("Pacific/Apia"))
    s29, n29 = apia.window_at(dt.datetime(2011, 12, 29, 12, tzinfo=ZoneInfo("Pacific/Apia")).timestamp())
    assert n29 == DAY and apia.local(s29 + n29).date() == dt.date(2011, 12, 31)
    # Lord Howe Island moves its clocks by 30 minutes: days of 23.5 h and 24.5 h.
    tz = ZoneInfo("Australia/Lord_Howe")
    lh = WindowGrid(DAY, 0, tz)
    lengths = {lh.window_at(dt.datetime(2024, m, d, 12, tzinfo=tz).timestamp())[1]
               for m, d in ((4, 7), (10, 6))}
    assert lengths == {DAY + 1_800, DAY - 1_800}


def test_local_weeks_start_on_local_mondays_and_shift_keeps_local_midnight():
    tz = ZoneInfo("Europe/Berlin")
    weeks = WindowGrid(7 * DAY, ISO_WEEK_ORIGIN, tz)
    start, length = weeks.window_at(dt.datetime(2024, 3, 31, 12, tzinfo=tz).timestamp())  # a Sunday
    assert weeks.local(start).isoformat() == "2024-03-25T00:00:00+01:00"  # Monday, CET
    assert length == 7 * DAY - 3_600
    assert weeks.local(start + length).isoformat() == "2024-04-01T00:00:00+02:00"  # Monday, CEST
    days = WindowGrid(DAY, 0, tz)
    monday = int(dt.datetime(2024, 4, 1, tzinfo=tz).timestamp())
    back = [days.shift(monday, -7 * j) for j in (1, 2)]
    assert [days.local(s).isoformat() for s in back] == ["2024-03-25T00:00:00+01:00",
                                                         "2024-03-18T00:00:00+01:00"]
    assert days.shift(monday, 0) == monday and days.shift(back[0], 7) == monday
    # The seasonal baseline of a local day: the same local weekday, whatever DST did.
    assert seasonal_ranges(monday, DAY, 2, grid=days) == [(b, b + 1) for b in back]
    assert monday - WEEK not in back  # UTC arithmetic would look an hour off


def test_grid_parameters_are_checked():
    tz = ZoneInfo("Europe/Berlin")
    for bad in (dict(length=0), dict(length=7_200, tz=tz), dict(length=DAY + 3_600, tz=tz),
                dict(length=DAY, origin=3_600, tz=tz)):
        with pytest.raises(ValueError):
            WindowGrid(**bad)
    with pytest.raises(ValueError, match="calendar"):
        WindowGrid(DAY, 0, tz).assign(np.array([1e300]))
    assert WindowGrid(DAY, 0, tz).assign(np.array([0.0, MAX_CALENDAR_TIME]))[0].size == 2
    # Without a zone: the UTC windows of window_starts, all of the nominal length.
    t = np.array([1_700_000_123.5, 1e12])
    starts, lengths = WindowGrid(300).assign(t)
    assert starts.tolist() == window_starts(t, 300).tolist() and lengths.tolist() == [300, 300]


def test_model_config_time_zone():
    cfg = ModelConfig(window_seconds=DAY, window_timezone="America/New_York")
    assert cfg.window_grid == WindowGrid(DAY, 0, ZoneInfo("America/New_York"))
    assert cfg.local_time(1_710_046_800) == "2024-03-10T00:00:00-05:00"
    assert ModelConfig().local_time(1_700_006_400) == "2023-11-15T00:00:00+00:00"
    weeks = ModelConfig(window_seconds=7 * DAY, window_alignment="iso_week", window_timezone="Asia/Tokyo")
    start = weeks.window_grid.window_at(1_700_000_000.0)[0]
    assert weeks.window_grid.local(start).strftime("%a %H:%M %z") == "Mon 00:00 +0900"
    for bad, message in [({"window_timezone": "Mars/Olympus"}, "unknown time zone"),
                         ({"window_timezone": "localtime"}, "unknown time zone"),
                         ({"window_timezone": "../../etc/passwd"}, "unknown time zone"),
                         ({"window_timezone": ""}, "at least 1"),
                         ({"window_seconds": 7_200, "window_timezone": "Europe/Berlin"},
                          "multiple of 86400")]:
        with pytest.raises(ValidationError, match=message) as info:
            ModelConfig.model_validate({"window_seconds": DAY} | bad)
        assert info.value.errors()[0]["loc"] == ("window_timezone",)


def test_label_cohorts_use_the_aggregators_local_days():
    cfg = ModelConfig(window_seconds=DAY, window_timezone="Europe/Berlin", tier=1,
                      performance=PerformanceConfig())
    tz = ZoneInfo("Europe/Berlin")
    times = [dt.datetime(2024, 3, 31, 0, 0, 1, tzinfo=tz).timestamp(),   # first second of the 23 h day
             dt.datetime(2024, 3, 31, 23, 59, tzinfo=tz).timestamp(),    # its last minute (CEST)
             dt.datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=tz).timestamp(),  # the repeated hour
             1e300]                                                      # far future: no cohort
    cols = RecordColumns.from_records("m", [
        PredictionRecord("m", "1", f"p{i}", t, {"x": 1.0}, score=0.5) for i, t in enumerate(times)])
    starts = [p.window_start for p in predictions_of(cols, cfg)]
    assert starts == cfg.window_grid.assign(np.array(times[:3]))[0].tolist()
    assert [cfg.local_time(s) for s in starts] == ["2024-03-31T00:00:00+01:00"] * 2 + [
        "2024-10-27T00:00:00+02:00"]


@pytest.mark.parametrize("zone", ["Europe/Berlin", "Asia/Tokyo", "America/New_York", "Australia/Sydney"])
def test_local_day_windows_keep_most_of_their_fdr_level(zone):
    # The gate's epochs are UTC days; a local day is gated in the epoch holding most of
    # it, from its first slot there, so it claims at least half an epoch's slots (all but
    # the DST hour and the hours before the boundary) -- not the few left after its start.
    spending = EpochSpending(slot_seconds=300)
    grid = WindowGrid(DAY, 0, ZoneInfo(zone))
    noon = [dt.datetime(2024, 1, 1, 12, tzinfo=ZoneInfo(zone)).timestamp() + d * DAY for d in range(366)]
    starts, lengths = grid.assign(np.array(noon))
    placed = [spending.place(s, n) for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]
    epochs = [e for e, _slot, _k in placed]
    assert len(set(epochs)) == len(epochs)  # one day per epoch, as UTC days
    for (epoch, slot, k), s, n in zip(placed, starts.tolist(), lengths.tolist(), strict=True):
        lo, hi = max(s, epoch * DAY), min(s + n, (epoch + 1) * DAY)
        assert hi - lo >= DAY / 2 - 3_600  # the epoch holds most of the day
        assert (slot, k) == ((lo - epoch * DAY) // 300, (hi - lo) // 300)  # its time in that epoch
    # Windows that start on an epoch boundary or stay inside one epoch are placed where they start.
    for start, length in ((0, 300), (86_400 + 600, 300), (0, DAY), (7 * DAY, 31 * DAY)):
        epoch, slot = spending.locate(start)
        assert spending.place(start, length) == (epoch, slot, spending.span(length, slot))


@pytest.mark.parametrize("zone", ["Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe", "America/New_York"])
@pytest.mark.parametrize("length", [300, 3_600])
def test_short_windows_tile_each_local_day_from_its_midnight(zone, length):
    tz = ZoneInfo(zone)
    rng = np.random.default_rng(length)
    t = rng.uniform(1_700_000_000, 1_740_000_000, 3_000)  # 2023-11 .. 2025-02: two DST seasons
    starts, lengths = WindowGrid(length, 0, tz).assign(t)
    days, _ = WindowGrid(DAY, 0, tz).assign(t)
    for ti, s, n, d in zip(t.tolist(), starts.tolist(), lengths.tolist(), days.tolist(), strict=True):
        assert s <= ti < s + n and (s - d) % length == 0  # elapsed from local midnight
        assert local_date(s, tz) == local_date(s + n - 1, tz)  # never across a local midnight
        assert n == length or local_date(s + n, tz) > local_date(s, tz)  # only a day's last is cut
    if zone in ("Europe/Berlin", "America/New_York"):  # whole-hour offsets: the UTC windows
        assert starts.tolist() == window_starts(t, length).tolist() and set(lengths.tolist()) == {length}
    if zone == "Asia/Kolkata":  # +05:30: local hours start at :30 UTC
        expected = {1_800} if length == 3_600 else set(range(0, 3_600, 300))
        assert {s % 3_600 for s in starts.tolist()} == expected


def test_short_windows_seasonal_hour_across_dst():
    tz = ZoneInfo("Europe/Berlin")
    grid = WindowGrid(300, 0, tz)
    now = int(dt.datetime(2024, 4, 1, 10, 5, tzinfo=tz).timestamp())  # CEST
    [(lo, hi)] = seasonal_ranges(now, 300, 1, grid=grid)
    assert grid.local(lo).isoformat() == "2024-03-25T10:00:00+01:00" and hi - lo == 3_600
    assert (now - 300) - lo == 167 * 3_600  # UTC arithmetic would take 09:00 CET
    # In the repeated hour the wall clock says which pass; a skipped hour maps past the jump.
    second_pass = int(dt.datetime(2024, 11, 3, 2, 30, tzinfo=tz).timestamp())
    assert grid.local(grid.shift(second_pass, -7)).isoformat() == "2024-10-27T02:30:00+02:00"
    skipped_week_later = grid.shift(int(dt.datetime(2024, 3, 24, 2, 30, tzinfo=tz).timestamp()), 7)
    assert grid.local(skipped_week_later).isoformat() == "2024-03-31T03:30:00+02:00"
    assert grid.hour_start(now) == now - 300
    kolkata = WindowGrid(300, 0, ZoneInfo("Asia/Kolkata"))
    assert kolkata.hour_start(1_700_000_000) % 3_600 == 1_800
