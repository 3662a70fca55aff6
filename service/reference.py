"""Reference (baseline) profiles built from tabular data."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sdk.record import PredictionRecord, RecordError, validate_record
from sketches.profile import WindowProfile

REFERENCE_VERSION = "reference"


def reference_records(
    model_id: str,
    rows: Iterable[Mapping[str, Any]],
    score_column: str | None = None,
    label_column: str | None = None,
) -> list[PredictionRecord]:
    """Validate rows (feature columns plus optional score and label columns).

    Raises
    ------
    RecordError
        With ``field`` = ``"rows[i].<field>"`` for the first bad row.
    """
    out = []
    for i, row in enumerate(rows):
        features = {k: v for k, v in row.items() if k not in (score_column, label_column)}
        data = {
            "model_id": model_id,
            "model_version": REFERENCE_VERSION,
            "prediction_id": str(i),
            "event_time": 0.0,
            "features": features,
            "score": row.get(score_column) if score_column else None,
            "predicted_label": row.get(label_column) if label_column else None,
        }
        try:
            out.append(validate_record(data))
        except RecordError as exc:
            raise RecordError(f"rows[{i}].{exc.field}", exc.message, exc.reason) from None
    return out


def build_reference(
    model_id: str,
    rows: Iterable[Mapping[str, Any]],
    score_column: str | None = None,
    label_column: str | None = None,
) -> WindowProfile:
    """A reference profile (window start and length 0) of the rows.

    Raises
    ------
    RecordError
        Naming the first bad row and field.
    """
    profile = WindowProfile(model_id, 0, 0)
    profile.add_records(reference_records(model_id, rows, score_column, label_column))
    return profile


def read_csv_rows(path: str) -> list[dict[str, Any]]:
    """Rows of a CSV file; empty cells become missing values."""
    import pandas as pd

    df = pd.read_csv(path)
    return [
        {k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
        for r in df.to_dict(orient="records")
    ]
