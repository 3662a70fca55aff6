"""Model registration: declare a model's configuration, feature types and lineage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sdk.http import model_url, send_json

FEATURE_TYPES = ("numeric", "categorical", "boolean")


def register_model(
    api_url: str,
    model_id: str,
    *,
    features: Mapping[str, Mapping[str, Any]] | None = None,
    window_seconds: int | None = None,
    owner: str | None = None,
    api_key: str | None = None,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Create or replace a model's configuration (``PUT /v1/models/{model_id}``).

    Parameters
    ----------
    api_url : str
        Base URL of the fleetwatch API, e.g. ``"http://localhost:8000"``.
    model_id : str
    features : mapping of name -> declaration, optional
        ``{"type": t, "source": s}`` per feature: ``t`` one of
        :data:`FEATURE_TYPES`; ``s`` (optional) the upstream source the
        feature comes from (its lineage, e.g. ``"weather_feed"``), so that
        many features broken by one source can be reported as one incident.
    window_seconds : int, optional
        Profile window length; the API's default when omitted.
    owner : str, optional
        Owning team.
    api_key : str, optional
        Sent as ``X-API-Key``.
    timeout : float
        Seconds.

    Returns
    -------
    dict
        The API's answer: ``{"model_id", "config"}``.

    Raises
    ------
    urllib.error.HTTPError
        422 if a declaration is invalid (the body names the field).

    Notes
    -----
    The configuration is replaced as a whole: fields not given take the API's defaults.

    Examples
    --------
    >>> register_model("http://localhost:8000", "fraud-v2", window_seconds=3600,  # doctest: +SKIP
    ...                features={"amount": {"type": "numeric", "source": "payments"},
    ...                          "country": {"type": "categorical", "source": "geoip"}})
    """
    body: dict[str, Any] = {"features": {name: dict(decl) for name, decl in (features or {}).items()}}
    if window_seconds is not None:
        body["window_seconds"] = window_seconds
    if owner is not None:
        body["owner"] = owner
    return send_json("PUT", model_url(api_url, model_id), body, api_key=api_key, timeout=timeout)
