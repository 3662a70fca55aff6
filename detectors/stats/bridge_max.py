"""Null law of the two-sample KS statistic on discrete data: the largest |B(u_j)| of a Brownian
bridge at the pooled CDF's atoms.

With ties, sqrt(N_eff) D of two samples from a common F converges in law to
max_j |B(u_j)|, B a Brownian bridge and u_j = F at the distinct values (Schmid,
"On the Kolmogorov and Smirnov limit theorems for discontinuous distribution
functions", Ann. Math. Statist. 29, 1958). The Kolmogorov law is the supremum over
every u in (0, 1), so on a dozen atoms it is conservative: a Poisson(4) feature
alarmed in 1.1 % of H0 pairs at alpha = 0.05 (`benchmarks/calibration.py`), because
P(max_j |B(u_j)| >= 1.36) is 0.0117 there, not 0.05.

The bridge is a Gaussian Markov process: given B(u_j) = x, B(u_{j+1}) is normal with
mean x (1 - u_{j+1}) / (1 - u_j) and variance (u_{j+1} - u_j) (1 - u_{j+1}) / (1 - u_j).
The probability of staying inside (-c, c) at every atom is carried atom by atom as the
mass of ``CELLS`` equal cells of (-c, c), each cell's mass moved from its midpoint with
the exact normal cell probabilities (mass-conserving for any step, however small). The
piecewise-constant cells overstate the escape slightly: on 12 Poisson(4) atoms the
p-value is within 1 % of 128 cells and of 200,000 simulated bridges; on 64 atoms 10 %
above (conservative).
"""

from __future__ import annotations

import numpy as np
from scipy import special

CELLS = 32
"""Cells of (-c, c) carrying the bridge's law from atom to atom (0.25 ms on 12 atoms)."""
MAX_ATOMS = 64
"""Most atoms the law is computed on (1.4 ms there); beyond, the Kolmogorov law (nearly
continuous data, where it is nearly exact)."""


def bridge_max_sf(c: float, u: np.ndarray) -> float:
    """P(max_j |B(u_j)| >= c) for a Brownian bridge B.

    Parameters
    ----------
    c : float
        Threshold (sqrt(N_eff) D for the KS statistic D).
    u : numpy.ndarray, shape (k,)
        Increasing points of [0, 1] (the pooled CDF at the distinct values); those at 0
        or 1, where the bridge is 0, are ignored.

    Returns
    -------
    float
        In [0, 1]; 1.0 when ``c <= 0``, 0.0 when no point lies inside (0, 1).

    Examples
    --------
    >>> round(bridge_max_sf(1.0, np.array([0.5])), 4)  # one atom: P(|N(0, 1/4)| >= 1)
    0.0455
    >>> bool(bridge_max_sf(1.36, np.linspace(0.01, 0.99, 60)) < special.kolmogorov(1.36))
    True
    """
    if c <= 0.0:
        return 1.0
    u = np.asarray(u, dtype=np.float64)
    u = u[(u > 0.0) & (u < 1.0)]
    if not u.size:
        return 0.0
    edges = np.linspace(-c, c, CELLS + 1)
    mid = (edges[:-1] + edges[1:]) / 2.0
    mass = np.diff(special.ndtr(edges / np.sqrt(u[0] * (1.0 - u[0]))))
    for a, b in zip(u[:-1], u[1:], strict=True):
        rho = (1.0 - b) / (1.0 - a)
        z = (edges[None, :] - rho * mid[:, None]) / np.sqrt((b - a) * rho)
        mass = mass @ np.diff(special.ndtr(z), axis=1)
    return float(min(max(1.0 - mass.sum(), 0.0), 1.0))
