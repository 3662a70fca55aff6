"""LOND: levels based on the number of discoveries."""

from __future__ import annotations

from dataclasses import dataclass

from detectors.fdr.gamma import jm_gamma


@dataclass
class Lond:
    """LOND online FDR procedure (onlineFDR ``LOND(original=TRUE)``).

    Parameters
    ----------
    alpha : float
        Target FDR, in (0, 1).

    Notes
    -----
    alpha_t = alpha gamma_t (D_{t-1} + 1), D the number of discoveries so far
    (Javanmard & Montanari, Ann. Statist. 2018). Controls FDR at every t under
    independence.

    Examples
    --------
    >>> lond = Lond()
    >>> lond.test(2.9e-8), lond.discoveries
    (True, 1)
    """

    alpha: float = 0.05
    t: int = 0
    discoveries: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError("alpha must be in (0, 1)")

    def next_level(self) -> float:
        """The level alpha_t of the next test."""
        return self.alpha * jm_gamma(self.t + 1) * (self.discoveries + 1)

    def test(self, p_value: float) -> bool:
        """Test the next hypothesis; True if rejected."""
        reject = p_value <= self.next_level()
        self.t += 1
        self.discoveries += reject
        return reject
