"""The predicted-class rate test is calibrated for a binary classifier (its two classes are one
test) and Bonferroni-combined over three or more classes."""

from __future__ import annotations

import numpy as np

from detectors.drift.class_rate import class_rate_test
from detectors.result import Status
from sketches.categorical import CategoricalSketch


def _labels(counts: dict[str, int]) -> CategoricalSketch:
    s = CategoricalSketch()
    s.update_counts(counts)
    return s


def _alarm_rate(draw, pairs: int) -> float:
    return sum(class_rate_test(_labels(draw()), _labels(draw())).status == Status.DRIFT
               for _ in range(pairs)) / pairs


def test_binary_classifier_false_alarm_rate_is_near_alpha():
    rng = np.random.default_rng(4)

    def draw() -> dict[str, int]:
        positives = int(rng.binomial(10_000, 0.3))
        return {"true": positives, "false": 10_000 - positives}

    rate = _alarm_rate(draw, 3_000)
    assert 0.035 <= rate <= 0.065, rate  # Bonferroni over both classes gave ~0.02


def test_three_classes_stay_at_or_below_alpha_and_a_shift_is_found():
    rng = np.random.default_rng(5)
    shares = [0.5, 0.3, 0.2]

    def draw() -> dict[str, int]:
        return dict(zip("abc", rng.multinomial(10_000, shares).tolist(), strict=True))

    assert _alarm_rate(draw, 2_000) <= 0.06
    shifted = dict(zip("abc", rng.multinomial(10_000, [0.47, 0.33, 0.2]).tolist(), strict=True))
    assert class_rate_test(_labels(draw()), _labels(shifted)).status == Status.DRIFT
