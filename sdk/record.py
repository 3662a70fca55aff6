"""The versioned prediction record: fleetwatch's telemetry contract.

One record describes one prediction served by one model. Field limits protect
the pipeline from pathological input (a record with 10,000 features or a
megabyte string is rejected, not profiled).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 4  # the wire encoding written (see sdk.wire; versions 1 to 3 are still read)

MAX_ID_LENGTH = 256
MAX_FEATURES = 1_000
MAX_SLICES = 16
MAX_CLASSES = 1_000
MAX_STRING_LENGTH = 1_024
INT_MIN = -(2**63)
"""Smallest integer a record may hold (anywhere: features, score, labels, times)."""
INT_MAX = 2**64 - 1
"""Largest integer a record may hold. Integers must fit 64 bits, signed or unsigned: the
values of every numpy integer dtype, and exactly the integers MessagePack (the wire) carries.
Send a larger magnitude as a float."""

FeatureValue = None | bool | int | float | str | list[float] | tuple[float, ...]
"""A feature value: a scalar, or a vector of floats (an embedding, :mod:`sdk.vectors`)."""


# Machine-readable reasons a record is rejected (bounded: used as a metric label).
MISSING_FIELD = "missing_field"
WRONG_TYPE = "wrong_type"
TOO_LARGE = "too_large"
NOT_FINITE = "not_finite"
OUT_OF_RANGE = "out_of_range"
INVALID_ID = "invalid_id"
VECTOR_DIMENSION = "vector_dimension"  # a vector feature of the wrong length (see sdk.vectors)
RECORD_REASONS = (MISSING_FIELD, WRONG_TYPE, TOO_LARGE, NOT_FINITE, OUT_OF_RANGE, INVALID_ID)


class RecordError(ValueError):
    """A record violates the contract.

    Attributes
    ----------
    field : str
        Dotted path of the offending field, e.g. ``"features.age"``.
    message : str
        What is wrong with it.
    reason : str
        One of :data:`RECORD_REASONS`.
    """

    def __init__(self, field: str, message: str, reason: str = WRONG_TYPE) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.reason = reason


@dataclass(slots=True)
class PredictionRecord:
    """One prediction, as emitted by a model server.

    Parameters
    ----------
    model_id : str
        Stable identifier of the model (the Kafka message key).
    model_version : str
        Version of the model that served the prediction.
    prediction_id : str
        Unique id of the prediction; the join key for delayed labels.
    event_time : float
        When the prediction was served, seconds since the Unix epoch (UTC).
    features : dict[str, None | bool | int | float | str | list[float]]
        Model inputs. ``None`` and NaN are missing values; ``±inf`` is kept and
        counted separately by the profiles. A list, tuple or 1-D numpy array of
        numbers is a vector feature (an embedding, :mod:`sdk.vectors`).
    score : float or None
        Scalar score (e.g. probability of the positive class); finite.
    class_probabilities : dict[str, float] or None
        Per-class probabilities for multiclass models.
    predicted_label : str, int, bool or None
        The decision the model returned.
    slices : dict[str, str]
        Slice keys (e.g. ``{"country": "DE"}``) for sub-population profiles.
    latency_ms : float or None
        Serving latency in milliseconds.
    """

    model_id: str
    model_version: str
    prediction_id: str
    event_time: float
    features: dict[str, FeatureValue] = field(default_factory=dict)
    score: float | None = None
    class_probabilities: dict[str, float] | None = None
    predicted_label: str | int | bool | None = None
    slices: dict[str, str] = field(default_factory=dict)
    latency_ms: float | None = None


def check_identifier(value: Any, name: str) -> str:
    """A non-empty string of at most MAX_ID_LENGTH characters.

    Raises
    ------
    RecordError
    """
    if value is None or value == "":
        raise RecordError(name, "must be a non-empty string", MISSING_FIELD)
    if not isinstance(value, str):
        raise RecordError(name, "must be a non-empty string")
    if len(value) > MAX_ID_LENGTH:
        raise RecordError(name, f"longer than {MAX_ID_LENGTH} characters", TOO_LARGE)
    return value


#: Model ids that URL normalization removes (RFC 3986 section 5.2.4, dot segments).
_DOT_SEGMENTS = (".", "..")


def check_model_id(value: Any, name: str = "model_id") -> str:
    """A model id: the one rule of the SDK, the Kafka envelope, ingest and the API.

    A model id is 1 to MAX_ID_LENGTH printable characters, without ``/`` or ``\\``, and
    not ``.`` or ``..``, so that ``/v1/models/{model_id}`` reaches it: a decoded ``%2F``
    splits the path, ``\\`` is a separator to many clients and proxies, dot segments
    are removed by URL normalization, and control characters (or lone surrogates)
    cannot be sent or stored as UTF-8.

    Raises
    ------
    RecordError
        Naming ``name``, reason ``missing_field``, ``wrong_type``, ``too_large`` or
        ``invalid_id``.

    Examples
    --------
    >>> check_model_id("fraud-v3")
    'fraud-v3'
    >>> check_model_id("../../keys")
    Traceback (most recent call last):
    ...
    sdk.record.RecordError: model_id: must not contain '/' or '\\'
    """
    value = check_identifier(value, name)
    if "/" in value or "\\" in value:
        raise RecordError(name, "must not contain '/' or '\\'", INVALID_ID)
    if value in _DOT_SEGMENTS:
        raise RecordError(name, "must not be '.' or '..'", INVALID_ID)
    if not value.isprintable():
        raise RecordError(name, "must hold printable characters only", INVALID_ID)
    return value


def check_integer(value: int, name: str) -> int:
    """An integer that fits 64 bits, signed or unsigned: INT_MIN <= value <= INT_MAX.

    Raises
    ------
    RecordError
        ``out_of_range`` for an integer beyond 64 bits.

    Examples
    --------
    >>> check_integer(2**64 - 1, "score"), check_integer(-2**63, "score")
    (18446744073709551615, -9223372036854775808)
    >>> check_integer(2**64, "features.amount")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sdk.record.RecordError: features.amount: integer beyond 64 bits (allowed: -2**63 to 2**64 - 1; ...
    """
    if INT_MIN <= value <= INT_MAX:
        return value
    raise RecordError(name, "integer beyond 64 bits (allowed: -2**63 to 2**64 - 1; "
                            "send a larger magnitude as a float)", OUT_OF_RANGE)


def check_number(value: Any, name: str) -> float | None:
    """A finite number (as float) or None; NaN, +/-inf and integers beyond 64 bits are rejected.

    Raises
    ------
    RecordError
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError(name, f"must be a number or null, got {type(value).__name__}")
    if isinstance(value, int):
        check_integer(value, name)
    value = float(value)
    if not math.isfinite(value):
        raise RecordError(name, "must be finite (NaN and inf are not allowed)", NOT_FINITE)
    return value


def _features(value: Any) -> dict[str, FeatureValue]:
    if not isinstance(value, Mapping):
        raise RecordError("features", "must be an object of name -> value")
    if len(value) > MAX_FEATURES:
        raise RecordError("features", f"more than {MAX_FEATURES} features", TOO_LARGE)
    from sdk.vectors import is_vector, vector_bytes  # (sdk.vectors imports this module)

    for name, v in value.items():
        check_feature_name(name)
        if is_vector(v):
            vector_bytes(v, name)
        else:
            check_feature_value(v, name)
    return dict(value)


def check_feature_name(name: Any) -> str:
    """A feature name: a non-empty string of at most MAX_ID_LENGTH characters.

    Raises
    ------
    RecordError
    """
    return _check_name(name, "features", "feature name")


def check_slice_key(key: Any) -> str:
    """A slice key, checked like a feature name: a non-empty string of at most
    MAX_ID_LENGTH characters.

    Raises
    ------
    RecordError
        Naming ``slices``.
    """
    return _check_name(key, "slices", "slice key")


def _check_name(name: Any, field: str, what: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_ID_LENGTH:
        raise RecordError(field, f"{what} {name!r:.80} must be a non-empty string of at most "
                                 f"{MAX_ID_LENGTH} characters")
    if not name.isascii():
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise RecordError(field, f"{what} {name!r:.80} is not valid text (a lone surrogate)") from None
    return name


def check_feature_value(v: Any, name: str) -> FeatureValue:
    """None, a bool, a number (NaN and inf allowed; an integer within 64 bits) or a short string:
    a scalar feature value (a record's vectors are checked by :func:`sdk.vectors.vector_bytes`;
    on the wire they travel apart, :mod:`sdk.wire`).

    Raises
    ------
    RecordError
    """
    if v is None or isinstance(v, bool | float):
        return v
    if isinstance(v, int):
        return check_integer(v, f"features.{name}")
    if isinstance(v, str):
        if len(v) > MAX_STRING_LENGTH:
            raise RecordError(f"features.{name}", f"string longer than {MAX_STRING_LENGTH}", TOO_LARGE)
        return v
    raise RecordError(
        f"features.{name}", f"must be number, string, bool or null, got {type(v).__name__}"
    )


def _slices(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RecordError("slices", "must be an object of key -> string")
    if len(value) > MAX_SLICES:
        raise RecordError("slices", f"more than {MAX_SLICES} slice keys", TOO_LARGE)
    for k, v in value.items():
        check_slice_value(v, k)
    return dict(value)


def check_slice_value(v: Any, key: Any) -> str:
    """A slice value: a string of at most MAX_STRING_LENGTH characters.

    Raises
    ------
    RecordError
    """
    check_slice_key(key)
    if not isinstance(v, str) or len(v) > MAX_STRING_LENGTH:
        raise RecordError(f"slices.{key}", f"slice values must be strings of at most "
                                           f"{MAX_STRING_LENGTH} characters")
    return v


def check_class_probabilities(value: Any) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or len(value) > MAX_CLASSES:
        raise RecordError(
            "class_probabilities", f"must be an object of <= {MAX_CLASSES} classes", TOO_LARGE
        )
    out = {}
    for k, v in value.items():
        p = check_number(v, f"class_probabilities.{k}")
        if not isinstance(k, str) or p is None or not 0.0 <= p <= 1.0:
            raise RecordError(
                f"class_probabilities.{k}", "must be a probability in [0, 1]", OUT_OF_RANGE
            )
        out[k] = p
    return out


def check_event_time(value: Any) -> float:
    """A finite, non-negative Unix time in seconds.

    Raises
    ------
    RecordError
    """
    t = check_number(value, "event_time")
    if t is None:
        raise RecordError("event_time", "required", MISSING_FIELD)
    if t < 0:
        raise RecordError("event_time", "must be a non-negative Unix time in seconds", OUT_OF_RANGE)
    return t


def check_predicted_label(value: Any) -> str | int | bool | None:
    """None, a bool, an integer within 64 bits or a short string.

    Raises
    ------
    RecordError
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return check_integer(value, "predicted_label")
    if isinstance(value, str) and len(value) <= MAX_STRING_LENGTH:
        return value
    raise RecordError("predicted_label", "must be a short string, integer, bool or null")


def validate_record(data: Mapping[str, Any]) -> PredictionRecord:
    """Check a mapping against the contract and build a :class:`PredictionRecord`.

    Parameters
    ----------
    data : Mapping[str, Any]
        Field name -> value, as in :class:`PredictionRecord`.

    Returns
    -------
    PredictionRecord

    Raises
    ------
    RecordError
        Naming the first offending field.

    Examples
    --------
    >>> r = validate_record({"model_id": "m", "model_version": "1", "prediction_id": "p1",
    ...                      "event_time": 1.7e9, "features": {"x": 1.5}})
    >>> r.features["x"]
    1.5
    >>> validate_record({"model_id": "", "model_version": "1"})
    Traceback (most recent call last):
    ...
    sdk.record.RecordError: model_id: must be a non-empty string
    """
    if not isinstance(data, Mapping):
        raise RecordError("record", "must be an object")
    model_id = check_model_id(data.get("model_id"))
    model_version = check_identifier(data.get("model_version"), "model_version")
    prediction_id = check_identifier(data.get("prediction_id"), "prediction_id")
    event_time = check_event_time(data.get("event_time"))
    return PredictionRecord(
        model_id=model_id,
        model_version=model_version,
        prediction_id=prediction_id,
        event_time=event_time,
        features=_features(data.get("features", {})),
        score=check_number(data.get("score"), "score"),
        class_probabilities=check_class_probabilities(data.get("class_probabilities")),
        predicted_label=check_predicted_label(data.get("predicted_label")),
        slices=_slices(data.get("slices")),
        latency_ms=check_number(data.get("latency_ms"), "latency_ms"),
    )
