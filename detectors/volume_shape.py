"""A model's daily traffic shape, learned from the event times of its reference rows.

Before a model has a past day of the same kind, its volume test judges a window against
its own trailing windows (:mod:`detectors.volume_history`). A straight line through them
follows a daily wave badly where it turns (the night trough, the evening fall): its
curvature widens the test until a drop of 75 % reads p ~ 10^-2. A reference uploaded
with event times (``time_column``) says how the traffic moves over the day; the trailing
windows then only need to say how much traffic there is: the expectation of a window is
the trailing level times the shape's ratio between the window and them
(:func:`detectors.quality.volume.shaped_expectation`).

The shape
---------
The reference's rows are counted in :data:`SHAPE_BINS` bins of the local day (the
model's window zone), with each bin's *exposure*: the days the rows' time span covered
it. The rate per bin is a Poisson regression with an offset (log exposure) on the first
:data:`HARMONICS` Fourier terms of the time of day (a smooth daily curve with
2 * HARMONICS + 1 coefficients; Fourier terms for seasonality: Hyndman & Athanasopoulos,
"Forecasting: Principles and Practice", 3rd ed., 2021, sec. 7.4; the GLM and its
quasi-Poisson covariance, dispersion = Pearson X^2 / (B - p) when above 1: McCullagh &
Nelder, "Generalized Linear Models", 1989, sec. 6.2). A few thousand rows give each
window's ratio to its neighbours to a few per cent, where the hourly counts alone would
be ~10 % off. The shape is learned only from rows that span every bin of a local day
(:data:`MIN_EXPOSURE`), and from at least :data:`MIN_SHAPE_ROWS` rows.

Pure numpy, no I/O. The shape is stored with the reference (its counts and exposures;
uploads that add rows merge them) and fitted when read.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

DAY = 86_400
#: Bins of the local day the reference's rows are counted in (15 minutes each).
SHAPE_BINS = 96
#: Fourier terms of the time of day in the fit.
HARMONICS = 2
#: Rows a shape is learned from at least.
MIN_SHAPE_ROWS = 200
#: Days of the rows' time span every bin must have been covered (a whole local day).
MIN_EXPOSURE = 0.95
#: Points per day a window's mean rate is read at (every 5 minutes).
_POINTS_PER_DAY = 288
_IRLS_STEPS = 50
#: Largest Fourier coefficient of the log rate a curve may have (e^10: a day whose busiest
#: hour has ~10^8 times the traffic of its quietest is no smooth curve; the fit diverges).
_MAX_LOG_AMPLITUDE = 10.0
#: A gap between consecutive rows longer than this (seconds) is taken as outside the
#: reference's time range, not as hours without traffic: a stray row days away from the
#: others never makes the days between them count as covered.
MAX_GAP_SECONDS = 6 * 3_600
#: The largest count or exposure a stored shape may hold (a reference holds at most
#: 10^5 rows an upload; 10^12 leaves room for any number of merges and keeps every sum exact).
_MAX_STORED = 1e12
#: The last UTC hour whose local time is in a calendar year every zone can express (two
#: days before 10000-01-01 UTC); later times take its offset.
_LAST_HOUR = (253_402_300_800 - 2 * DAY) // 3_600


def seconds_of_day(times: np.ndarray, tz: dt.tzinfo | None) -> np.ndarray:
    """Local seconds since midnight (float64, shape of ``times``) of Unix ``times`` in
    ``tz`` (UTC without one); the offset is read once per distinct UTC hour.

    Examples
    --------
    >>> seconds_of_day(np.array([0.0, 90_000.0]), None).tolist()
    [0.0, 3600.0]
    >>> seconds_of_day(np.array([0.0]), ZoneInfo("Europe/Berlin")).tolist()
    [3600.0]
    """
    t = np.asarray(times, dtype=np.float64)
    if tz is None:
        return np.mod(t, DAY)
    hours, where = np.unique(np.minimum(t // 3_600, _LAST_HOUR), return_inverse=True)
    offsets = np.array([dt.datetime.fromtimestamp(h * 3_600, tz).utcoffset().total_seconds()
                        for h in hours.tolist()])
    return np.mod(t + offsets[where.reshape(t.shape)], DAY)


def zone_of(name: str | None) -> dt.tzinfo | None:
    """The zone a shape was counted in (None: UTC)."""
    return None if name is None else ZoneInfo(name)


@dataclass(frozen=True)
class ShapeFit:
    """The fitted daily curve: log rate = ``X(x) @ coef`` at local time of day ``x``.

    Attributes
    ----------
    coef : np.ndarray of float64, shape (2 * HARMONICS + 1,)
    cov : np.ndarray of float64, shape (p, p)
        Quasi-Poisson covariance of ``coef``.
    dispersion : float
        Pearson X^2 / (B - p), at least 1.
    """

    coef: np.ndarray
    cov: np.ndarray
    dispersion: float

    def window_rates(self, starts: np.ndarray, length: int, tz: dt.tzinfo | None
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The mean rate over each window ``[s, s + length)`` (relative units, shape (n,)),
        and the gradient of its log with respect to ``coef`` (shape (n, p))."""
        steps = max(int(length * _POINTS_PER_DAY // DAY), 1)
        offsets = (np.arange(steps) + 0.5) * (length / steps)
        points = np.asarray(starts, dtype=np.float64)[:, None] + offsets[None, :]
        x = seconds_of_day(points, tz) / DAY
        design = _design(x.ravel())
        rate = np.exp(design @ self.coef).reshape(x.shape)
        mean = rate.mean(axis=1)
        weights = (rate / rate.sum(axis=1, keepdims=True)).ravel()[:, None]
        grad = (design * weights).reshape(*x.shape, -1).sum(axis=1)
        return mean, grad

    def hourly(self) -> list[float]:
        """The curve's mean rate in each local hour 0-23, relative to the day's mean (24 values)."""
        x = (np.arange(24 * 12) + 0.5) / (24 * 12)
        rate = np.exp(_design(x) @ self.coef).reshape(24, 12).mean(axis=1)
        return (rate / rate.mean()).tolist()

    def ratio_variance(self, rates: np.ndarray, grad: np.ndarray, current: np.ndarray) -> float:
        """The variance (delta method) of log(r_cur / sum_i r_i), the current window's rate
        over the summed rates of the windows in ``rates`` (shape (n,)), whose log gradients
        are the rows of ``grad`` (shape (n, p)); ``current``: the current window's (shape (p,))."""
        d = current - (rates[:, None] * grad).sum(axis=0) / rates.sum()
        return float(d @ self.cov @ d)


def _design(x: np.ndarray) -> np.ndarray:
    """[1, cos 2 pi k x, sin 2 pi k x for k = 1..HARMONICS] at times of day ``x`` in [0, 1)."""
    k = np.arange(1, HARMONICS + 1)
    angle = 2 * np.pi * np.asarray(x, dtype=np.float64)[:, None] * k[None, :]
    return np.hstack([np.ones((angle.shape[0], 1)), np.cos(angle), np.sin(angle)])


@dataclass(frozen=True)
class DailyShape:
    """The reference rows counted by local time of day: what the daily curve is fitted to.

    Attributes
    ----------
    counts : tuple of float, length SHAPE_BINS
        Rows per bin of the local day.
    exposure : tuple of float, length SHAPE_BINS
        Days the rows' time span covered each bin.
    zone : str or None
        The IANA zone the bins are local to (None: UTC).

    Examples
    --------
    A day of rows at a rate of 1 + sin(2 pi h / 24) / 2 (h the hour): three times as many
    around 06:00 as around 18:00, which two Fourier terms of the log rate read as 2.9:

    >>> minutes = np.arange(0, DAY, 60.0)
    >>> t = np.repeat(minutes, np.rint(10 * (1 + np.sin(2 * np.pi * minutes / DAY) / 2)).astype(int))
    >>> fit = DailyShape.of_times(t, None).fit
    >>> rate, _ = fit.window_rates(np.array([5.5 * 3_600, 17.5 * 3_600]), 3_600, None)
    >>> round(float(rate[0] / rate[1]), 1)
    2.9
    """

    counts: tuple[float, ...]
    exposure: tuple[float, ...]
    zone: str | None = None

    @classmethod
    def of_times(cls, times: np.ndarray, tz: dt.tzinfo | None) -> DailyShape | None:
        """The shape of rows at Unix ``times`` in zone ``tz`` (None without any time)."""
        t = np.asarray(times, dtype=np.float64)
        if t.size == 0:
            return None
        counts = np.bincount(_bins(t, tz), minlength=SHAPE_BINS).astype(np.float64)
        exposure = np.bincount(_bins(_covered_points(np.sort(t)), tz), minlength=SHAPE_BINS)
        return cls(tuple(counts.tolist()), tuple(exposure.astype(np.float64).tolist()),
                   getattr(tz, "key", None))

    def merged(self, other: DailyShape | None) -> DailyShape:
        """Both uploads' rows (a shape of another zone is replaced by ``other``)."""
        if other is None:
            return self
        if other.zone != self.zone:
            return other
        return DailyShape(tuple(a + b for a, b in zip(self.counts, other.counts, strict=True)),
                          tuple(a + b for a, b in zip(self.exposure, other.exposure, strict=True)),
                          self.zone)

    @property
    def rows(self) -> int:
        return int(sum(self.counts))

    @property
    def missing(self) -> str | None:
        """Why no curve is fitted (None: one is)."""
        return self._fitted[1]

    def unusable(self, zone: str | None) -> str | None:
        """Why the curve does not serve windows local to ``zone`` (None: it does)."""
        if self.zone != zone:
            return (f"counted in {self.zone or 'UTC'} time, while the model's windows are in "
                    f"{zone or 'UTC'}: upload the reference again")
        return self.missing

    @property
    def fit(self) -> ShapeFit | None:
        """The daily curve (module docstring), or None (:attr:`missing` says why)."""
        return self._fitted[0]

    @functools.cached_property
    def _fitted(self) -> tuple[ShapeFit | None, str | None]:
        if self.rows < MIN_SHAPE_ROWS:
            return None, (f"the reference's event times hold {self.rows} rows (the daily shape needs "
                          f"{MIN_SHAPE_ROWS})")
        if min(self.exposure) < MIN_EXPOSURE:
            return None, "the reference's event times do not cover a whole day"
        y, exposure = np.array(self.counts), np.array(self.exposure)
        design = _design((np.arange(SHAPE_BINS) + 0.5) / SHAPE_BINS)
        offset = np.log(exposure)
        coef = np.zeros(design.shape[1])
        coef[0] = np.log(y.sum() / exposure.sum())
        with np.errstate(over="ignore", invalid="ignore"):
            for _ in range(_IRLS_STEPS):
                mu = np.exp(offset + design @ coef)
                try:
                    step = np.linalg.solve(design.T @ (design * mu[:, None]), design.T @ (y - mu))
                except np.linalg.LinAlgError:
                    break
                coef = coef + step
                if not np.all(np.isfinite(coef)) or np.max(np.abs(step)) < 1e-10:
                    break
            mu = np.exp(offset + design @ coef)
            info = design.T @ (design * mu[:, None])
            finite = bool(np.all(np.isfinite(coef)))
            converged = finite and float(np.max(np.abs(coef[1:]))) <= _MAX_LOG_AMPLITUDE
        if not converged or np.linalg.cond(info) > 1e12:
            return None, ("the reference's event times follow no smooth daily curve (the fit does not "
                          "converge)")
        dispersion = max(1.0, float(np.sum((y - mu) ** 2 / mu)) / (SHAPE_BINS - design.shape[1]))
        cov = dispersion * np.linalg.inv(info)
        if not (math.isfinite(dispersion) and np.all(np.isfinite(cov))):
            return None, "the reference's event times give the daily curve no finite variance"
        return ShapeFit(coef, cov, dispersion), None

    def to_dict(self) -> dict[str, Any]:
        return {"counts": list(self.counts), "exposure": list(self.exposure), "zone": self.zone}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DailyShape:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        ValueError
            On anything but two lists of SHAPE_BINS numbers in [0, 10^12], or an unknown zone.
        """
        counts, exposure = _stored_bins(d["counts"]), _stored_bins(d["exposure"])
        zone = d.get("zone")
        try:
            zone_of(zone)
        except (ZoneInfoNotFoundError, ValueError, TypeError) as exc:
            raise ValueError(f"unknown zone {zone!r}") from exc
        return cls(counts, exposure, zone)


def _stored_bins(values: Any) -> tuple[float, ...]:
    """A stored list of :data:`SHAPE_BINS` counts or exposures, checked (ValueError)."""
    if not isinstance(values, list) or len(values) != SHAPE_BINS or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= _MAX_STORED for v in values):
        raise ValueError(f"a daily shape has {SHAPE_BINS} counts and exposures, numbers in [0, 1e12]")
    return tuple(float(v) for v in values)


def _covered_points(t: np.ndarray) -> np.ndarray:
    """A point per bin width (15 minutes) through each stretch of the sorted times ``t``
    without a gap over :data:`MAX_GAP_SECONDS`: each point covers its bin once."""
    step = DAY / SHAPE_BINS
    breaks = np.flatnonzero(np.diff(t) > MAX_GAP_SECONDS)
    starts, ends = t[np.append(0, breaks + 1)], t[np.append(breaks, t.size - 1)]
    sizes = np.ceil((ends - starts) / step).astype(np.int64)
    offsets = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return np.repeat(starts, sizes) + offsets * step


def _bins(times: np.ndarray, tz: dt.tzinfo | None) -> np.ndarray:
    return np.minimum((seconds_of_day(times, tz) * SHAPE_BINS // DAY).astype(np.intp), SHAPE_BINS - 1)
