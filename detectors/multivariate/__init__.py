"""Multivariate drift of a model's numeric features, from the co-moments of its profiles.

Both tests read :class:`~sketches.comoments.CoMoments` (complete rows, mean vector,
scatter matrix) of the window and of the baseline, never raw rows:

- :mod:`~detectors.multivariate.reconstruction`: PCA reconstruction error in
  NannyML's manner, exact from the moments;
- :mod:`~detectors.multivariate.correlation`: the largest change of a pairwise
  correlation (Fisher z).

Their results belong to the model: feature :data:`MULTIVARIATE_FEATURE`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from detectors.result import TestResult, insufficient
from sketches.comoments import CoMoments

MULTIVARIATE_FEATURE = "__multivariate__"
"""Pseudo-feature of the tests on a model's numeric features taken together."""
MIN_ROWS = 30
"""Complete rows each side needs."""


@dataclass(frozen=True)
class Aligned:
    """The baseline's and the window's blocks on the features both hold that vary in the
    baseline (a constant has no correlation), in the baseline's order."""

    names: tuple[str, ...]
    reference: CoMoments
    current: CoMoments


def aligned(reference: CoMoments, current: CoMoments) -> Aligned:
    """Restrict both blocks to their shared, non-constant (in the baseline) features.

    Examples
    --------
    >>> a, b = CoMoments(), CoMoments()
    >>> a.update({"x": [1.0, 2.0, 3.0], "y": [1.0, 1.0, 1.0], "z": [3.0, 1.0, 2.0]}, {}, 3)
    >>> b.update({"z": [1.0, 2.0], "x": [0.0, 1.0]}, {}, 2)
    >>> aligned(a, b).names
    ('x', 'z')
    """
    shared = [k for k in reference.names if k in current.names]
    ref = reference.subset(shared)
    varies = np.diag(ref.m2) > 1e-12 * np.maximum(ref.mean**2, 1.0) * max(ref.n, 1)
    names = tuple(k for k, v in zip(shared, varies, strict=True) if v)
    return Aligned(names, reference.subset(names), current.subset(names))


def prepared(check: str, feature: str, reference: CoMoments, current: CoMoments,
             min_count: int) -> Aligned | TestResult:
    """The aligned blocks of a test, or its ``insufficient_data`` result: fewer than 2 shared
    varying features, or fewer than ``min_count`` complete rows on a side.

    Examples
    --------
    >>> prepared("correlation", "m", CoMoments(), CoMoments(), 30).status.value
    'insufficient_data'
    """
    a = aligned(reference, current)
    ref, cur = a.reference, a.current
    if len(a.names) < 2:
        return insufficient(check, feature, cur.n, ref.n,
                            "needs >= 2 numeric features shared with the baseline, varying there")
    if ref.n < min_count or cur.n < min_count:
        return insufficient(check, feature, cur.n, ref.n,
                            f"needs >= {min_count} complete rows on each side")
    return a
