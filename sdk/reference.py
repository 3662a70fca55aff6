"""Upload a model's reference (baseline) data to the fleetwatch API.

The API builds the reference profile from the rows; the SDK stays free of
sketch libraries. Uses only the standard library's HTTP client.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sdk.http import model_url, send_json
from sdk.pii import PiiPolicy
from sdk.record import RecordError, check_feature_value
from sdk.tabular import rows

UPLOAD_CHUNK_ROWS = 20_000


def _clean(value: Any) -> Any:
    """A JSON value: NaN becomes null, numpy scalars Python numbers."""
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _hashed(pii: PiiPolicy, row: dict[str, Any], i: int) -> dict[str, Any]:
    """``row`` with the policy applied; its hashed values checked first, since the API
    sees only their hashes.

    Raises
    ------
    RecordError
        Naming ``rows[i].features.<name>`` for an integer beyond 64 bits.
    """
    for name in pii.hash & row.keys():
        if type(row[name]) is int:
            try:
                check_feature_value(row[name], name)
            except RecordError as exc:
                raise RecordError(f"rows[{i}].{exc.field}", exc.message, exc.reason) from None
    return pii.apply_row(row)


def upload_reference(
    api_url: str,
    model_id: str,
    data: Any,
    *,
    feature_names: Sequence[str] | None = None,
    score_column: str | None = None,
    label_column: str | None = None,
    time_column: str | None = None,
    truth_column: str | None = None,
    pii: PiiPolicy | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
    replace: bool = True,
) -> dict[str, Any]:
    """Replace a model's reference profile with one built from ``data``.

    Parameters
    ----------
    api_url : str
        Base URL of the fleetwatch API, e.g. ``"http://localhost:8000"``.
    model_id : str
    data : DataFrame, mapping of name -> array / sequence, 2-D numpy array, or iterable of mappings
        One row per prediction: feature columns, optionally a score column and
        a predicted-label column (and a true-label column). A 2-D array needs
        ``feature_names``.
    feature_names : sequence of str, optional
        Column names of a 2-D array.
    score_column, label_column : str, optional
        Columns holding the model's score and predicted label.
    time_column : str, optional
        Column holding each row's event time (Unix seconds): the service then
        learns each feature's floors from how much it moves between the
        model's windows (docs/detectors.md, learned floors). Rows in time
        order keep the uploads' windows whole (each request of
        ``UPLOAD_CHUNK_ROWS`` rows is learned from on its own).
    truth_column : str, optional
        Column holding the true label (e.g. of the validation set): the labelled
        reference becomes the baseline of the label-joined checks (tier-1 models
        registered with ``performance``).
    pii : PiiPolicy, optional
        The policy the model's client applies: the same features are dropped
        or hashed (with the same secret) so the reference matches live traffic
        and raw values never leave the process.
    api_key : str, optional
        Sent as ``X-API-Key``.
    timeout : float
        Seconds per HTTP request.
    replace : bool
        Replace the model's reference (default), or merge these rows into it.

    Returns
    -------
    dict
        The API's answer for the last chunk (``{"model_id", "count", ...}``).

    Raises
    ------
    urllib.error.HTTPError
        If the API refuses the data (the body names the row and field), 404
        ``model_not_found`` for a model never registered.
    sdk.record.RecordError
        If a column the policy hashes holds an integer beyond 64 bits (the API
        would see only its hash), naming the row and field.
    """
    url = model_url(api_url, model_id, "/reference")
    answer: dict[str, Any] = {}
    chunk: list[dict[str, Any]] = []
    first = True

    def send(chunk_rows: list[dict[str, Any]]) -> dict[str, Any]:
        # the first chunk replaces the reference (unless merging); the next ones merge into it
        body = {"rows": chunk_rows, "score_column": score_column, "label_column": label_column,
                "time_column": time_column, "truth_column": truth_column, "replace": replace and first}
        return send_json("POST", url, body, api_key=api_key, timeout=timeout)

    for i, row in enumerate(rows(data, feature_names)):
        cleaned = {k: _clean(v) for k, v in row.items()}
        chunk.append(_hashed(pii, cleaned, i) if pii is not None else cleaned)
        if len(chunk) >= UPLOAD_CHUNK_ROWS:
            answer, chunk, first = send(chunk), [], False
    if chunk or first:
        answer = send(chunk)
    return answer
