"""Model registration: declare a model's configuration, feature types and lineage.

:func:`register_model` creates a model or changes the fields it is given and nothing else
(``PATCH /v1/models/{id}``, a JSON merge patch), so a second call never resets what an
earlier call, or the API, set.
"""

from __future__ import annotations

import json
import urllib.error
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

from sdk.http import model_url, send_json

FEATURE_TYPES = ("numeric", "categorical", "boolean")


class FeatureSpec(TypedDict, total=False):
    """A declared feature: ``type`` one of :data:`FEATURE_TYPES`, ``source`` its lineage."""

    type: Literal["numeric", "categorical", "boolean"]
    source: str | None


class PersistenceSpec(TypedDict, total=False):
    """k-of-m persistence: ``k`` breaching windows among the last ``m``; auto-resolve after
    ``resolve_after`` quiet windows (docs/alerting.md)."""

    k: int
    m: int
    resolve_after: int


class PerformanceSpec(TypedDict, total=False):
    """Label-joined performance monitoring (tier-1 models); fields as in docs/api.md."""

    task: Literal["binary", "multiclass", "regression"]
    threshold: float
    label_horizon_seconds: int
    expected_label_fraction: float
    sample_rate: float
    baseline_seconds: int
    auc_floor: float
    log_loss_floor: float
    accuracy_floor: float
    mae_floor: float | None
    mae_relative_floor: float
    slice_min_labeled: int
    slice_min_per_class: int


def register_model(
    api_url: str,
    model_id: str,
    *,
    features: Mapping[str, FeatureSpec] | None = None,
    window_seconds: int | None = None,
    window_alignment: Literal["epoch", "iso_week"] | None = None,
    window_timezone: str | None = None,
    expected_records_per_day: float | None = None,
    owner: str | None = None,
    tier: Literal[1, 2, 3] | None = None,
    performance: PerformanceSpec | None = None,
    persistence: PersistenceSpec | None = None,
    routing: Mapping[str, str] | None = None,
    slice_features: Sequence[str] | None = None,
    max_slice_values: int | None = None,
    vector_features: Mapping[str, int] | None = None,
    api_key: str | None = None,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Register a model, or change the given fields of a registered one.

    Only the arguments given (not None) are sent. A registered model gets them as a JSON
    merge patch (``PATCH /v1/models/{model_id}``): every other field keeps its stored
    value, and ``features``, ``performance``, ``persistence`` and ``routing`` merge into
    the stored ones (a feature or routing label not named keeps its value). A model not
    registered yet is created (``POST /v1/models``) with the defaults for the rest.

    Parameters
    ----------
    api_url : str
        Base URL of the fleetwatch API, e.g. ``"http://localhost:8000"``.
    model_id : str
    features : mapping of name -> FeatureSpec, optional
        ``{"type": t, "source": s}`` per feature: ``t`` one of :data:`FEATURE_TYPES`;
        ``s`` (optional) the upstream source the feature comes from (its lineage, e.g.
        ``"weather_feed"``), so that many features broken by one source can be reported
        as one incident.
    window_seconds : int, optional
        Profile window length, seconds.
    window_alignment : {"epoch", "iso_week"}, optional
        Origin of the windows: the Unix epoch (7-day windows start on Thursdays) or
        Monday 1970-01-05 (7-day windows are ISO weeks).
    window_timezone : str, optional
        IANA zone (e.g. ``"Europe/Berlin"``) whose calendar the windows follow: day
        windows are local days (23 h and 25 h on DST days); windows dividing an hour roll
        up into local days. Refused (422, field ``window_timezone``) for an unknown zone or
        another window length (docs/operations.md, "Windows in a time zone").
    expected_records_per_day : float, optional
        The traffic the model expects: when a window would hold fewer records than a
        test needs, the API answers a warning (issued here as a ``UserWarning``), and
        says which window length would hold them.
    owner : str, optional
        Owning team.
    tier : {1, 2, 3}, optional
        1 business critical (label-joined performance runs), 2 standard, 3 best effort.
    performance : PerformanceSpec, optional
        Label-joined performance monitoring (tier 1 only), e.g. ``{"threshold": 0.7}``.
    persistence : PersistenceSpec, optional
        k-of-m persistence of alerts, e.g. ``{"k": 1, "m": 1}``.
    routing : mapping of str -> str, optional
        Labels the receivers route on (``team``, ``channel``, ...).
    slice_features : sequence of str, optional
        Features (or slice keys) profiled per value as well (replaces the stored list).
    max_slice_values : int, optional
        Slice values kept per slice key.
    vector_features : mapping of str -> int, optional
        Vector (embedding) features and their dimension, 2 to 4,096 (merged into the
        stored ones; :mod:`sdk.vectors`).
    api_key : str, optional
        Sent as ``X-API-Key`` (scope write).
    timeout : float
        Seconds, per request.

    Returns
    -------
    dict
        The API's answer: ``{"model_id", "config", "warnings", ...}`` with the whole
        configuration now in force.

    Raises
    ------
    urllib.error.HTTPError
        422 if a value is invalid (the body's ``field`` names it); 401/403 without a key
        of scope write.
    urllib.error.URLError
        If the API cannot be reached.

    Notes
    -----
    None means "leave as it is", so this function cannot put a field back to its
    default: send ``{"owner": null}`` to ``PATCH /v1/models/{id}`` for that.

    Examples
    --------
    >>> register_model("http://localhost:8000", "fraud-v2", window_seconds=3600,  # doctest: +SKIP
    ...                tier=1, performance={"threshold": 0.7}, routing={"team": "payments"},
    ...                features={"amount": {"type": "numeric", "source": "payments"},
    ...                          "country": {"type": "categorical", "source": "geoip"}})
    """
    given = {"features": None if features is None else {k: dict(v) for k, v in features.items()},
             "window_seconds": window_seconds, "window_alignment": window_alignment,
             "window_timezone": window_timezone, "expected_records_per_day": expected_records_per_day,
             "owner": owner, "tier": tier,
             "performance": None if performance is None else dict(performance),
             "persistence": None if persistence is None else dict(persistence),
             "routing": None if routing is None else dict(routing),
             "slice_features": None if slice_features is None else list(slice_features),
             "max_slice_values": max_slice_values,
             "vector_features": None if vector_features is None else dict(vector_features)}
    body = {k: v for k, v in given.items() if v is not None}
    answer = _register(api_url, model_id, body, api_key, timeout)
    for text in answer.get("warnings") or ():
        warnings.warn(f"model {model_id!r}: {text}", UserWarning, stacklevel=2)
    return answer


def _register(api_url: str, model_id: str, body: dict[str, Any], api_key: str | None,
              timeout: float) -> dict[str, Any]:
    url = model_url(api_url, model_id)
    for _attempt in range(2):  # a concurrent registration between the two calls: patch it
        try:
            return send_json("PATCH", url, body, api_key=api_key, timeout=timeout)
        except urllib.error.HTTPError as exc:
            if exc.code != 404 or _code(exc) != "model_not_found":
                raise
        try:
            return send_json("POST", f"{api_url.rstrip('/')}/v1/models", {"model_id": model_id, **body},
                             api_key=api_key, timeout=timeout)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise
    raise RuntimeError(f"model {model_id!r} was created and deleted concurrently")  # pragma: no cover


def _code(exc: urllib.error.HTTPError) -> str | None:
    """The ``code`` of an API error body (None if the body is not one)."""
    try:
        body = json.loads(exc.read())
    except (ValueError, OSError):
        return None
    return body.get("code") if isinstance(body, dict) else None
