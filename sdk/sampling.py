"""Deterministic sampling by prediction id.

Whether a prediction is kept depends only on its ``prediction_id`` and the
model's rate, never on a random draw: a label logged later for the same
prediction id (by any process, in any language) makes the same decision, so
the labels that are kept are exactly those of the kept predictions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

_SCALE = 2**64


def sample_point(prediction_id: str) -> float:
    """The prediction id's fixed point in [0, 1).

    Parameters
    ----------
    prediction_id : str

    Returns
    -------
    float
        The first 8 bytes of SHA-256 of the UTF-8 id, big-endian, divided by 2**64.

    Notes
    -----
    SHA-256 is used (not Python's ``hash``) so the point is the same in every
    process and easy to reproduce in other languages.

    Examples
    --------
    >>> round(sample_point("p-1"), 6) == round(sample_point("p-1"), 6)
    True
    >>> 0.0 <= sample_point("anything") < 1.0
    True
    """
    digest = hashlib.sha256(prediction_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


class Sampler:
    """Per-model sampling rates.

    Parameters
    ----------
    rates : Mapping[str, float], optional
        ``model_id -> rate`` in [0, 1]: the share of predictions (and of their
        labels) kept.
    default_rate : float
        Rate of models not in ``rates``.

    Raises
    ------
    ValueError
        If a rate is outside [0, 1].

    Examples
    --------
    >>> s = Sampler({"ranker": 0.1})
    >>> s.keeps("fraud", "p-1")        # default rate 1: everything is kept
    True
    >>> kept = sum(s.keeps("ranker", f"p-{i}") for i in range(10_000))
    >>> 900 < kept < 1100
    True
    """

    def __init__(self, rates: Mapping[str, float] | None = None, default_rate: float = 1.0) -> None:
        self.rates = dict(rates or {})
        self.default_rate = default_rate
        for model_id, rate in (*self.rates.items(), ("default", default_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"sampling rate of {model_id!r} must be in [0, 1], got {rate}")

    def rate(self, model_id: str) -> float:
        """The model's sampling rate."""
        return self.rates.get(model_id, self.default_rate)

    def keeps(self, model_id: str, prediction_id: str) -> bool:
        """Whether the prediction (and its label) is kept."""
        rate = self.rates.get(model_id, self.default_rate)
        return rate >= 1.0 or (rate > 0.0 and sample_point(prediction_id) < rate)
