"""Row subsets of record columns, for slice sub-profiles.

Profiles are built column by column (one vectorised update per feature) from
:class:`sdk.columns.RecordColumns`, the form the wire carries. A feature column
may also be a numpy array (float or integer, NaN missing), which producers
holding columnar data can pass without building Python lists.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sdk.columns import RecordColumns
from sdk.packed import take_column
from sketches.feature import Column


def subset(cols: RecordColumns, rows: np.ndarray, features: Sequence[str]) -> RecordColumns:
    """The records at ``rows`` (indices), with only ``features`` (scalar or vector) and no slices."""
    idx = rows.tolist()

    def take(column: Column | None) -> Column | None:
        return take_column(column, idx)

    return RecordColumns(
        cols.model_id, take(cols.model_version), take(cols.prediction_id), take(cols.event_time),
        {k: take(cols.features[k]) for k in features if k in cols.features},
        score=take(cols.score), predicted_label=take(cols.predicted_label),
        vectors={k: take(cols.vectors[k]) for k in features if k in cols.vectors},
    )
