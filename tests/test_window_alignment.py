"""Window alignment: the Unix epoch by default (7-day windows start on Thursdays), ISO
weeks (Monday 00:00 UTC) when a model asks for them."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from pydantic import ValidationError

from service.registry import ModelConfig
from sketches.window import ISO_WEEK_ORIGIN, window_starts

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
