"""Gamma (spending) sequences of the onlineFDR package."""

from __future__ import annotations

import math

JM_C = 0.07720838
SAFFRON_C = 0.4374901658
SAFFRON_EXPONENT = 1.6


def jm_gamma(j: int) -> float:
    """Javanmard & Montanari's sequence, used by LORD++ and LOND.

    gamma_j = C * log(max(j, 2)) / (j * exp(sqrt(log j))), C = 0.07720838, so that
    sum_j gamma_j ~= 1 (Javanmard & Montanari, "Online rules for control of
    false discovery rate and false discovery exceedance", Ann. Statist. 2018).

    Raises
    ------
    ValueError
        If ``j`` < 1.

    Examples
    --------
    >>> round(jm_gamma(1), 6), round(jm_gamma(2), 6)
    (0.053517, 0.011638)
    """
    if j < 1:
        raise ValueError("j must be >= 1")
    return JM_C * math.log(max(j, 2)) / (j * math.exp(math.sqrt(math.log(j))))


def saffron_gamma(j: int) -> float:
    """gamma_j = 0.4374901658 * j^-1.6 (SAFFRON and the batch procedures; sums to ~1).

    Raises
    ------
    ValueError
        If ``j`` < 1.

    Examples
    --------
    >>> round(saffron_gamma(1), 10)
    0.4374901658
    """
    if j < 1:
        raise ValueError("j must be >= 1")
    return SAFFRON_C * j ** -SAFFRON_EXPONENT
