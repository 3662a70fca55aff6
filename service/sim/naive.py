"""The naive policy fleetwatch's scorecard is compared with. Pure; no I/O.

It (:func:`naive_alerts`) pages per window and test, without FDR control, persistence or
grouping: a PSI above :data:`NAIVE_PSI` (any feature and the score), or a data-quality or
performance test with p < alpha and its effect over the floor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from service.sim.score import DECIDED, Alert

NAIVE_PSI = 0.2
NAIVE_RATE_CHECKS = frozenset({"null_rate", "type_mismatch", "nonfinite", "volume", "auc_drop",
                               "log_loss_increase"})


def naive_alerts(model_id: str, window_start: float, window_seconds: float,
                 results: Iterable[Mapping[str, Any]], alpha: float,
                 psi_threshold: float = NAIVE_PSI) -> list[Alert]:
    """The pages of the naive per-window policy for one window's stored test results.

    A decided result (status ok or drift) pages when its check is ``psi`` and its PSI
    exceeds ``psi_threshold``, or its check is a data-quality or performance test
    (:data:`NAIVE_RATE_CHECKS`) with ``p < alpha`` and ``|effect| >= floor``. Each page
    fires when its window closes.

    Examples
    --------
    >>> def r(f, check, status, effect, p):
    ...     return {"feature": f, "check": check, "status": status, "effect_size": effect,
    ...             "p_value": p, "floor": 0.1}
    >>> rs = [r("x", "psi", "ok", 0.25, 0.4), r("x", "js", "drift", 0.5, 0.0),
    ...       r("x", "null_rate", "drift", 0.3, 1e-4), r("y", "null_rate", "drift", 0.05, 1e-9)]
    >>> [(a.feature, a.check, a.fired_at) for a in naive_alerts("m", 0, 3600, rs, 0.01)]
    [('x', 'psi', 3600), ('x', 'null_rate', 3600)]
    """
    out = []
    for r in results:
        if r.get("status") not in DECIDED or r.get("effect_size") is None:
            continue
        check, effect = r["check"], float(r["effect_size"])
        if check == "psi":
            page = effect > psi_threshold
        elif check in NAIVE_RATE_CHECKS:
            p = r.get("p_value")
            page = p is not None and p < alpha and abs(effect) >= float(r.get("floor") or 0.0)
        else:
            page = False
        if page:
            out.append(Alert(f"naive:{model_id}:{r['feature']}:{check}:{window_start}", model_id,
                             r["feature"], check, window_start, window_start + window_seconds,
                             window_start + window_seconds))
    return out
