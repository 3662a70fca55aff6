"""Results that could not run (insufficient data, an error) report the configured floor."""

from __future__ import annotations

from detectors.config import DetectorConfig
from detectors.result import Status
from detectors.suite import evaluate_window
from sdk.record import PredictionRecord
from sketches.profile import WindowProfile


def profile(values: list[float], start: int = 0) -> WindowProfile:
    p = WindowProfile("m", start, 300 if start else 0)
    p.add_records([PredictionRecord("m", "1", str(i), start + 1.0, {"x": v, "c": str(int(v) % 3)})
                   for i, v in enumerate(values)])
    return p


def test_insufficient_data_results_report_the_configured_floor():
    baseline = profile([float(i) for i in range(2000)])
    current = profile([1.0, 2.0, 3.0], start=300)  # far fewer values than any test needs
    config = DetectorConfig.model_validate({"floors": {"psi": 0.3, "ks": 0.15, "js": 0.12}})
    results = {(r.feature, r.check): r for r in evaluate_window(current, baseline, config)}
    insufficient = {k: r for k, r in results.items() if r.status is Status.INSUFFICIENT_DATA}
    assert {("x", "psi"), ("x", "ks")} <= set(insufficient)
    assert insufficient[("x", "psi")].floor == 0.3 and insufficient[("x", "ks")].floor == 0.15
    assert all(r.floor > 0 for k, r in insufficient.items() if k[1] in ("psi", "ks", "js")), insufficient
