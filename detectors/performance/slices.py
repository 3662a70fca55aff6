"""The minimum sample rule of slice regressions: is a slice cohort large enough to be judged?

A model's traffic split by a slice key (country, device, ...) gives many
small cohorts. A small slice's metric is noisy, and testing it would spend
the fleet's false-discovery budget on tests that cannot find anything, or
page on an asymptotic approximation that does not hold yet. So a slice is
tested only when *both* its current cohort and its baseline reach a minimum
number of labeled predictions (and, for a binary classifier, of labeled
positives and negatives); otherwise every check of the slice answers
``insufficient_data``, which never alerts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from detectors.result import TestResult, insufficient


def sample_shortfall(baseline: Any, current: Any, min_labeled: int, min_per_class: int = 0) -> str | None:
    """Why a (baseline, current) pair of cohorts is too small to test, or None when it is not.

    Parameters
    ----------
    baseline, current : BinaryCohort, MulticlassCohort or RegressionCohort
        Anything with ``n`` (labeled examples); ``n_pos`` and ``n_neg`` are
        checked when present (binary cohorts).
    min_labeled : int
        Labeled examples each cohort needs, >= 0.
    min_per_class : int
        Labeled positives and labeled negatives each binary cohort needs, >= 0.

    Returns
    -------
    str or None
        The first shortfall in words (current cohort first), None when both
        cohorts qualify.

    Raises
    ------
    ValueError
        If a minimum is negative.

    Examples
    --------
    >>> from detectors.performance.binary import BinaryCohort
    >>> a, b = BinaryCohort(), BinaryCohort()
    >>> a.add([0.2] * 80 + [0.8] * 40, [0] * 80 + [1] * 40)
    >>> b.add([0.2] * 90 + [0.8] * 10, [0] * 90 + [1] * 10)
    >>> sample_shortfall(a, b, 100, 20)
    'current cohort has 100 labeled (needs >= 100) but 10 positives and 90 negatives (needs >= 20 each)'
    >>> sample_shortfall(a, a, 100, 20) is None
    True
    """
    if min_labeled < 0 or min_per_class < 0:
        raise ValueError("minimums must be >= 0")
    for side, c in (("current", current), ("baseline", baseline)):
        if c.n < min_labeled:
            return f"{side} cohort has {c.n} labeled (needs >= {min_labeled})"
        pos, neg = getattr(c, "n_pos", None), getattr(c, "n_neg", None)
        if pos is not None and neg is not None and min(pos, neg) < min_per_class:
            return (f"{side} cohort has {c.n} labeled (needs >= {min_labeled}) but {pos} positives "
                    f"and {neg} negatives (needs >= {min_per_class} each)")
    return None


SLICE_SEPARATOR = "@"


def base_check(check: str) -> str:
    """The catalog name of a check, without the slice a per-slice check carries.

    Examples
    --------
    >>> base_check("auc_drop@country:DE"), base_check("psi")
    ('auc_drop', 'psi')
    """
    return check.split(SLICE_SEPARATOR, 1)[0]


def for_slice(results: Sequence[TestResult], label: str, shortfall: str | None = None) -> list[TestResult]:
    """A slice's results under check names of their own, ``<check>@<label>``.

    Parameters
    ----------
    results : sequence of TestResult
        The slice cohort's results (feature unchanged, e.g. ``__performance__``).
    label : str
        The slice, ``"<key>:<value>"``.
    shortfall : str, optional
        A :func:`sample_shortfall` reason: every result becomes
        ``insufficient_data`` with it.

    Examples
    --------
    >>> from detectors.result import judged
    >>> r = judged("auc_drop", "__performance__", 3.0, 0.1, 1e-4, 500, 5000, floor=0.02)
    >>> [(x.check, x.status.value) for x in for_slice([r], "country:DE")]
    [('auc_drop@country:DE', 'drift')]
    >>> for_slice([r], "country:DE", "too small")[0].status.value
    'insufficient_data'
    """
    out = []
    for r in results:
        check = f"{r.check}{SLICE_SEPARATOR}{label}"
        if shortfall is not None:
            out.append(insufficient(check, r.feature, r.n_current, r.n_baseline, shortfall))
        else:
            out.append(replace(r, check=check))
    return out
