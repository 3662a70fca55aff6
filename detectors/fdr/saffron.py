"""SAFFRON: adaptive online FDR control (estimates the share of true nulls)."""

from __future__ import annotations

from dataclasses import dataclass, field

from detectors.fdr.gamma import saffron_gamma


@dataclass
class Saffron:
    """SAFFRON online FDR procedure (onlineFDR ``SAFFRON``).

    Parameters
    ----------
    alpha : float
        Target FDR, in (0, 1).
    w0 : float, optional
        Initial wealth, in [0, alpha]; default alpha / 2.
    lam : float
        Candidate threshold lambda in (0, 1): p <= lambda makes a test a candidate.

    Notes
    -----
    alpha_t = min(lambda, (1 - lambda) [w0 gamma_{t - C_0+}
    + (alpha - w0) gamma_{t - tau_1 - C_1+} + alpha sum_{j >= 2} gamma_{t - tau_j - C_j+}]),
    with C_0+ the candidates before t and C_j+ the candidates strictly between
    the j-th rejection tau_j and t (Ramdas, Zrnic, Wainwright & Jordan,
    "SAFFRON: an adaptive algorithm for online control of the false discovery
    rate", ICML 2018).

    Examples
    --------
    >>> s = Saffron()
    >>> round(s.next_level(), 8), s.test(2.9e-8)
    (0.00546863, True)
    """

    alpha: float = 0.05
    w0: float | None = None
    lam: float = 0.5
    t: int = 0
    candidates: int = 0
    rejections: list[int] = field(default_factory=list)
    candidates_after: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError("alpha must be in (0, 1)")
        if not 0.0 < self.lam < 1.0:
            raise ValueError("lam must be in (0, 1)")
        if self.w0 is None:
            self.w0 = self.alpha / 2
        if not 0.0 <= self.w0 <= self.alpha:
            raise ValueError("w0 must be in [0, alpha]")

    def next_level(self) -> float:
        """The level alpha_t of the next test."""
        t = self.t + 1
        wealth = self.w0 * saffron_gamma(t - self.candidates)
        for j, (tau, c) in enumerate(zip(self.rejections, self.candidates_after, strict=True)):
            weight = self.alpha - self.w0 if j == 0 else self.alpha
            wealth += weight * saffron_gamma(t - tau - c)
        return min(self.lam, (1 - self.lam) * wealth)

    def test(self, p_value: float) -> bool:
        """Test the next hypothesis; True if rejected."""
        reject = p_value <= self.next_level()
        self.t += 1
        if p_value <= self.lam:
            self.candidates += 1
            self.candidates_after = [c + 1 for c in self.candidates_after]
        if reject:
            self.rejections.append(self.t)
            self.candidates_after.append(0)
        return reject
