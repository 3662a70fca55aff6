"""The out-of-range test on t-digests of 10^6 values: counts beyond the baseline's range are
certain (the digest keeps its most extreme values), so the test decides instead of reading
``inconclusive`` (42 % of H0 pairs at 10^6 when the count was interpolated and bounded by the
digest's global rank error)."""

from __future__ import annotations

import numpy as np

from detectors.quality.out_of_range import out_of_range_share, out_of_range_test
from detectors.result import Status
from sketches.numeric import NumericSketch


def _digest(values: np.ndarray) -> NumericSketch:
    s = NumericSketch()
    for chunk in np.array_split(values, 50):
        s.update(chunk)
    assert not s.is_exact
    return s


def test_count_beyond_the_baseline_range_is_exact_and_the_test_decides():
    rng = np.random.default_rng(3)
    ref = rng.normal(size=1_000_000)
    reference = _digest(ref)
    for _ in range(4):
        cur = rng.normal(size=1_000_000)
        share, error = out_of_range_share(reference, _digest(cur))
        true = int(((cur < ref.min()) | (cur > ref.max())).sum())
        assert round(share * cur.size) == true and error == 0.0
        assert out_of_range_test(reference, _digest(cur)).status == Status.OK
    leak = np.concatenate([rng.normal(size=1_000_000), ref.max() + rng.uniform(0.1, 1.0, 12)])
    result = out_of_range_test(reference, _digest(leak))
    assert result.status == Status.DRIFT and result.statistic >= 12
