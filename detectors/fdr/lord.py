"""LORD++: levels based on recent discovery, with the ++ (GAI++) improvement."""

from __future__ import annotations

from dataclasses import dataclass, field

from detectors.fdr.gamma import jm_gamma


@dataclass
class LordPlusPlus:
    """LORD++ online FDR procedure (onlineFDR ``LORD(version="++")``).

    Parameters
    ----------
    alpha : float
        Target FDR, in (0, 1).
    w0 : float, optional
        Initial wealth, in [0, alpha]; default alpha / 10.

    Notes
    -----
    alpha_t = w0 gamma_t + (alpha - w0) gamma_{t - tau_1} 1{tau_1 < t}
    + alpha sum_{j >= 2} gamma_{t - tau_j}, with tau_j the time of the j-th
    rejection and gamma the Javanmard-Montanari sequence (Ramdas, Yang,
    Wainwright & Jordan, "Online control of the false discovery rate with
    decaying memory", NeurIPS 2017). Test t is rejected when p_t <= alpha_t.
    Controls FDR at every t under independence.

    Examples
    --------
    >>> lord = LordPlusPlus(alpha=0.05)
    >>> lord.test(2.9e-8), round(lord.next_level(), 8)
    (True, 0.00246645)
    """

    alpha: float = 0.05
    w0: float | None = None
    t: int = 0
    rejections: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError("alpha must be in (0, 1)")
        if self.w0 is None:
            self.w0 = self.alpha / 10
        if not 0.0 <= self.w0 <= self.alpha:
            raise ValueError("w0 must be in [0, alpha]")

    def next_level(self) -> float:
        """The level alpha_t of the next test."""
        t = self.t + 1
        level = self.w0 * jm_gamma(t)
        if self.rejections:
            level += (self.alpha - self.w0) * jm_gamma(t - self.rejections[0])
            level += self.alpha * sum(jm_gamma(t - tau) for tau in self.rejections[1:])
        return level

    def test(self, p_value: float) -> bool:
        """Test the next hypothesis; True if rejected (a discovery)."""
        reject = p_value <= self.next_level()
        self.t += 1
        if reject:
            self.rejections.append(self.t)
        return reject
