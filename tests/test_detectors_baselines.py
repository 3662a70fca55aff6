"""Baselines: pure range selection and merging, and a seasonal stream without real change."""

from __future__ import annotations

import numpy as np
import pytest

from detectors.baseline import (
    HOUR,
    WEEK,
    choose_baseline,
    merge_profiles,
    merged_baseline,
    seasonal_ranges,
    trailing_range,
    window_counts,
)
from detectors.config import BaselineConfig, DetectorConfig
from detectors.policy.floor import EffectFloorPolicy
from detectors.suite import alerting_checks, evaluate_window
from sketches.profile import FeatureProfile, WindowProfile

T0 = 1_700_006_400  # a Wednesday 00:00 UTC, multiple of 3600


def hourly_window(start: int, rng: np.random.Generator, n_scale: float = 1.0) -> WindowProfile:
    """One hour of traffic whose distributions follow the hour of day and the weekday."""
    hour, weekday = (start // HOUR) % 24, (start // 86_400 + 3) % 7
    weekend = weekday >= 5
    n = int(rng.poisson(n_scale * 400 * (1.5 + np.sin(2 * np.pi * hour / 24)) * (0.5 if weekend else 1)))
    p = WindowProfile("m", start, HOUR)
    p.count = n
    x = FeatureProfile()
    x.numeric.update(rng.normal(3 * np.sin(2 * np.pi * hour / 24) + (2 if weekend else 0), 1, n))
    c = FeatureProfile()
    probs = [0.6, 0.3, 0.1] if 8 <= hour < 20 else [0.1, 0.3, 0.6]
    c.categorical.update_counts(dict(zip("abc", rng.multinomial(n, probs).tolist(), strict=True)))
    p.features = {"x": x, "c": c}
    p.score.update(rng.beta(2 + hour / 6, 5, n))
    return p


def test_ranges_are_pure_and_aligned():
    assert trailing_range(T0 + 1800, 86_400) == (T0 - 86_400, T0)
    assert seasonal_ranges(T0 + 600, 300, weeks=2) == [(T0 - WEEK, T0 - WEEK + HOUR),
                                                       (T0 - 2 * WEEK, T0 - 2 * WEEK + HOUR)]
    assert seasonal_ranges(T0, 86_400, weeks=1) == [(T0 - WEEK, T0 - WEEK + 86_400)]
    with pytest.raises(ValueError):
        seasonal_ranges(T0, 2 * WEEK, weeks=1)
    with pytest.raises(ValueError):
        trailing_range(T0, 0)


def test_merging_copies_and_counts_windows():
    rng = np.random.default_rng(0)
    a, b = hourly_window(T0, rng), hourly_window(T0 + HOUR, rng)
    before = a.features["x"].numeric.count
    merged = merge_profiles("m", [a, b])
    assert merged.count == a.count + b.count
    assert merged.features["x"].numeric.count == before + b.features["x"].numeric.count
    assert a.features["x"].numeric.count == before  # inputs untouched
    assert window_counts([a, b, a]) == [2 * a.count, b.count]


def test_auto_prefers_reference_then_seasonal_then_trailing():
    rng = np.random.default_rng(1)
    ref, w = hourly_window(T0, rng), hourly_window(T0 + HOUR, rng)
    seasonal, trailing = merged_baseline("seasonal", "m", [w]), merged_baseline("trailing", "m", [w])
    assert choose_baseline("auto", ref, seasonal, trailing).kind == "reference"
    assert choose_baseline("auto", None, seasonal, trailing).kind == "seasonal"
    assert choose_baseline("auto", None, None, trailing).kind == "trailing"
    assert choose_baseline("reference", None, seasonal, trailing) is None
    assert choose_baseline("trailing", ref, seasonal, trailing).kind == "trailing"


def alerts_over_last_week(kind: str) -> list[tuple[int, str, str]]:
    rng = np.random.default_rng(2)
    weeks = 5
    windows = {s: hourly_window(s, rng) for s in range(T0, T0 + weeks * WEEK, HOUR)}
    config = DetectorConfig(baseline=BaselineConfig(kind=kind, seasonal_weeks=4))
    out = []
    for start in range(T0 + 4 * WEEK, T0 + weeks * WEEK, HOUR):
        in_range = lambda ranges: [windows[s] for lo, hi in ranges for s in range(lo, hi, HOUR)  # noqa: E731
                                   if s in windows]
        seasonal = in_range(seasonal_ranges(start, HOUR, 4))
        trailing = in_range([trailing_range(start, 86_400)])
        baseline = choose_baseline(kind, None, merged_baseline("seasonal", "m", seasonal),
                                   merged_baseline("trailing", "m", trailing))
        results = evaluate_window(windows[start], baseline.profile, config, window_counts(seasonal))
        policy = EffectFloorPolicy(alerting_checks(baseline.profile, config), alpha=0.01)
        out += [(start, a.feature, a.check) for a in policy.decide(results)]
    return out


def test_seasonal_stream_without_real_change_raises_no_alert_with_the_seasonal_baseline():
    # Hourly windows, 5 weeks; feature means, category mix, score and volume
    # follow the hour of day and the weekend. The last week is tested.
    assert alerts_over_last_week("seasonal") == []
    # The same stream against the trailing 24 h alerts: the seasonality is real.
    assert len(alerts_over_last_week("trailing")) > 50
