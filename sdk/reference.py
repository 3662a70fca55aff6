"""Upload a model's reference (baseline) data to the fleetwatch API.

The API builds the reference profile from the rows; the SDK stays free of
sketch libraries. Uses only the standard library's HTTP client.
"""

from __future__ import annotations

import json
import math
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

UPLOAD_CHUNK_ROWS = 20_000


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):  # numpy scalar
        return _clean(value.item())
    return value


def _rows(data: Any) -> Iterable[Mapping[str, Any]]:
    if hasattr(data, "to_dict"):  # pandas.DataFrame
        return data.to_dict(orient="records")
    return data


def upload_reference(
    api_url: str,
    model_id: str,
    data: Any,
    *,
    score_column: str | None = None,
    label_column: str | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Replace a model's reference profile with one built from ``data``.

    Parameters
    ----------
    api_url : str
        Base URL of the fleetwatch API, e.g. ``"http://localhost:8000"``.
    model_id : str
    data : pandas.DataFrame or iterable of mappings
        One row per prediction: feature columns, optionally a score column and a
        predicted-label column.
    score_column, label_column : str, optional
        Columns holding the model's score and predicted label.
    api_key : str, optional
        Sent as ``X-API-Key``.
    timeout : float
        Seconds per HTTP request.

    Returns
    -------
    dict
        The API's answer for the last chunk (``{"model_id", "count", ...}``).

    Raises
    ------
    urllib.error.HTTPError
        If the API refuses the data (the body names the field).
    """
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["X-API-Key"] = api_key
    answer: dict[str, Any] = {}
    chunk: list[dict[str, Any]] = []
    first = True

    def send(rows: list[dict[str, Any]], replace: bool) -> dict[str, Any]:
        body = json.dumps(
            {
                "rows": rows,
                "score_column": score_column,
                "label_column": label_column,
                "replace": replace,
            }
        ).encode()
        req = urllib.request.Request(
            f"{api_url.rstrip('/')}/v1/models/{model_id}/reference",
            data=body,
            headers=headers,
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())

    for row in _rows(data):
        chunk.append({k: _clean(v) for k, v in row.items()})
        if len(chunk) >= UPLOAD_CHUNK_ROWS:
            answer, chunk, first = send(chunk, first), [], False
    if chunk or first:
        answer = send(chunk, first)
    return answer
