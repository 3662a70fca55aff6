"""Drift tests of vector (embedding) features, on :class:`sketches.vector.VectorProfile`\\ s.

- :mod:`.centroid`: centroid shift (Hotelling's T² in the projection subspace);
- :mod:`.mmd`: maximum mean discrepancy with an RBF kernel on the profiles' samples;
- :mod:`.projections`: the share of projections whose distribution moved;
- :mod:`.norm`: a shift of the vectors' mean norm.
"""

from __future__ import annotations

from dataclasses import replace

from detectors.result import TestResult, insufficient
from sketches.vector import VectorProfile


def too_few(check: str, feature: str, reference: VectorProfile, current: VectorProfile, min_count: int,
            n_ref: int | None = None, n_cur: int | None = None, what: str = "vectors") -> TestResult | None:
    """The ``insufficient_data`` result when a side has fewer than ``min_count`` (its count, or
    ``n_ref`` / ``n_cur``), else None.

    Raises
    ------
    ValueError
        If the profiles differ in dimension or projection (they cannot be compared).
    """
    if not reference.compatible(current):
        raise ValueError("vector profiles of different dimension or projection")
    n_r = reference.count if n_ref is None else n_ref
    n_c = current.count if n_cur is None else n_cur
    if n_r < min_count or n_c < min_count:
        return insufficient(check, feature, n_c, n_r, f"needs >= {min_count} {what} on each side")
    return None


def with_detail(result: TestResult, detail: str) -> TestResult:
    """``result`` with ``detail`` appended to its reason."""
    return replace(result, reason=f"{result.reason}; {detail}" if result.reason else detail)
