"""JSON over HTTP to the fleetwatch API, with the standard library only."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any


def send_json(
    method: str, url: str, body: Any, *, api_key: str | None = None, timeout: float = 60.0
) -> dict[str, Any]:
    """Send ``body`` as JSON and return the JSON answer.

    Parameters
    ----------
    method : str
        ``"PUT"``, ``"POST"``, ...
    url : str
    body : JSON-serializable
    api_key : str, optional
        Sent as ``X-API-Key``.
    timeout : float
        Seconds.

    Returns
    -------
    dict

    Raises
    ------
    urllib.error.HTTPError
        If the API refuses the request (its body is ``{"code", "message", "field"}``).
    urllib.error.URLError
        If the API cannot be reached.
    """
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["X-API-Key"] = api_key
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method=method)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def model_url(api_url: str, model_id: str, suffix: str = "") -> str:
    """``{api_url}/v1/models/{model_id}{suffix}`` with the model id percent-encoded.

    Examples
    --------
    >>> model_url("http://api:8000/", "fraud v2", "/reference")
    'http://api:8000/v1/models/fraud%20v2/reference'
    """
    return f"{api_url.rstrip('/')}/v1/models/{urllib.parse.quote(model_id, safe='')}{suffix}"
