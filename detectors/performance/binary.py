"""Label-joined performance of a binary classifier: the mergeable ``BinaryCohort``.

A cohort is the set of predictions made in one prediction window (see
:mod:`detectors.performance.maturity`); labels join it as they arrive. The
cohort keeps only fixed-size, mergeable state, so cohorts built by several
aggregator replicas, or rolled up from 5-minute to daily windows, merge to
exactly the counts one process would have built:

* score histograms per label (positives, negatives) on the fixed grid of
  :mod:`detectors.performance.grid` (5,018 bins; 2.5e-4 wide in the middle,
  geometric toward 0 and 1), and a histogram of *all* predictions, labeled
  or not, for label-free estimates before the labels arrive
  (:mod:`detectors.performance.estimate`);
* the confusion counts at the model's decision threshold (predicted
  positive when ``score >= threshold``), exact;
* exact per-label sums of the per-example log loss and Brier loss and of
  their squares (for standard errors), and of the scores.

Counts are int64 (histograms) or Python ints; sums are float64.

Binning error
-------------
Everything except ROC AUC, average precision and ECE is exact. ROC AUC counts
every positive/negative pair in the same grid bin as a tie (one half), as
Mann-Whitney counts exact ties, so it differs from the AUC of the raw scores
by at most half the share of pairs that share a bin:
``|AUC - AUC_raw| <= 0.5 * sum_b pos_b neg_b / (P N)``, which
:meth:`BinaryCohort.roc_auc` reports as the metric's ``error_bound``. For
continuous class densities f1, f0 this is about ``1.25e-4 * integral f1 f0``
in the uniform part (1.3e-4 for unit-variance normal logits one apart; 1.5e-3
for a fraud-like model, 1 % positives with scores near 1e-4; 5.4e-3 for scores
rounded to 0.01, whose ties are genuine). The realised error is far smaller,
since pairs inside a bin split almost evenly: measured against
``sklearn.metrics.roc_auc_score`` on 20,000 and 200,000 examples, at most
4e-6 (binormal, uniform, confident scores) and 2e-5 (fraud-like); exactly 0
for rounded scores (tests/test_detectors_performance.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from detectors.performance.grid import (
    GRID_ID,
    MAX_WIDTH,
    MIDPOINTS,
    N_BINS,
    UNIFORM_BINS,
    bin_index,
    check_scores,
    dense,
    sparse,
)
from detectors.performance.metric import Metric, ratio, undefined

EPS = float(np.finfo(np.float64).eps)
"""Scores are clipped to [EPS, 1 - EPS] for the log loss, as sklearn.metrics.log_loss does."""
NO_LABELS = "no labeled examples"


def check_labels(labels: Any, size: int) -> np.ndarray:
    """``labels`` as a boolean array (True = positive class), or ``ValueError``.

    Accepts booleans and the numbers 0 and 1 (int or float).

    Examples
    --------
    >>> check_labels([0, 1, 1.0, True], 4).tolist()
    [False, True, True, True]
    >>> check_labels([0, 2], 2)
    Traceback (most recent call last):
    ...
    ValueError: labels must be 0/1 or booleans
    """
    y = np.asarray(labels).ravel()
    if y.size != size:
        raise ValueError(f"got {size} scores but {y.size} labels")
    if y.dtype == np.bool_:
        return y
    if y.size == 0:
        return np.zeros(0, dtype=bool)
    if y.dtype.kind not in "iuf" or not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0/1 or booleans")
    return y == 1


@dataclass(frozen=True, slots=True)
class CalibrationBin:
    """One equal-width bin of a reliability table.

    Attributes
    ----------
    lo, hi : float
        Score range [lo, hi) (the last bin includes 1.0).
    count : int
        Labeled examples with a score in the bin (0 for an empty bin).
    mean_score : float or None
        Their mean score (from grid-bin midpoints); ``None`` when empty.
    positive_rate : float or None
        Share of positives among them; ``None`` when empty.
    """

    lo: float
    hi: float
    count: int
    mean_score: float | None
    positive_rate: float | None


@dataclass(frozen=True, slots=True)
class Calibration:
    """Expected calibration error and the reliability table it sums.

    Attributes
    ----------
    ece : Metric
        ECE = sum_j (n_j / n) |positive_rate_j - mean_score_j| over the
        non-empty bins.
    bins : tuple of CalibrationBin
        Every bin, empty ones included (``count == 0``, means ``None``).
    """

    ece: Metric
    bins: tuple[CalibrationBin, ...]


class BinaryCohort:
    """Mergeable label-joined performance state of a binary classifier.

    Parameters
    ----------
    threshold : float
        The model's decision threshold in [0, 1]; an example is predicted
        positive when ``score >= threshold``.

    Attributes
    ----------
    threshold : float
    pos, neg : np.ndarray
        int64 score histograms of labeled positives / negatives on the grid
        (:data:`detectors.performance.grid.EDGES`).
    predicted : np.ndarray
        int64 score histogram of all predictions (labeled or not).
    tp, fp, tn, fn : int
        Confusion counts of the labeled examples at ``threshold``.
    log_loss_sum, log_loss_sq, brier_sum, brier_sq, score_sum : np.ndarray
        float64, length 2, indexed by label (0, 1): sums over the labeled
        examples of l_i, l_i^2, b_i, b_i^2 and s_i, with
        l_i = -[y_i ln p_i + (1 - y_i) ln(1 - p_i)], p_i = clip(s_i, EPS, 1 - EPS),
        and b_i = (s_i - y_i)^2.

    Notes
    -----
    Merging adds every array and counter, so it is associative and
    commutative: counts exactly, sums up to float64 rounding.

    Examples
    --------
    >>> c = BinaryCohort(threshold=0.5)
    >>> c.add_predictions([0.1, 0.4, 0.35, 0.8, 0.7])
    >>> c.add([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    >>> c.roc_auc().value, c.accuracy().value, c.n, c.n_predictions
    (0.75, 0.75, 4, 5)
    >>> round(c.log_loss().value, 4), round(c.brier_score().value, 4)
    (0.4723, 0.1581)
    >>> BinaryCohort.from_dict(c.to_dict()).roc_auc().value
    0.75
    """

    __slots__ = ("threshold", "pos", "neg", "predicted", "tp", "fp", "tn", "fn",
                 "log_loss_sum", "log_loss_sq", "brier_sum", "brier_sq", "score_sum")

    def __init__(self, threshold: float = 0.5) -> None:
        threshold = float(threshold)
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        self.threshold = threshold
        self.pos = np.zeros(N_BINS, dtype=np.int64)
        self.neg = np.zeros(N_BINS, dtype=np.int64)
        self.predicted = np.zeros(N_BINS, dtype=np.int64)
        self.tp = self.fp = self.tn = self.fn = 0
        self.log_loss_sum = np.zeros(2)
        self.log_loss_sq = np.zeros(2)
        self.brier_sum = np.zeros(2)
        self.brier_sq = np.zeros(2)
        self.score_sum = np.zeros(2)

    # -- building -------------------------------------------------------------
    def add_predictions(self, scores: Any) -> None:
        """Count predictions (labeled or not) into the all-predictions histogram.

        Raises
        ------
        ValueError
            If a score is NaN or outside [0, 1].
        """
        s = check_scores(scores)
        if s.size:
            self.predicted += np.bincount(bin_index(s), minlength=N_BINS)

    def add(self, scores: Any, labels: Any) -> None:
        """Add labeled examples (vectorised).

        Parameters
        ----------
        scores : array-like of float, shape (n,)
            Predicted probability of the positive class, in [0, 1].
        labels : array-like, shape (n,)
            Realised labels: booleans or 0/1.

        Raises
        ------
        ValueError
            If a score is NaN or outside [0, 1], a label is not 0/1, or the
            lengths differ.
        """
        s = check_scores(scores)
        y = check_labels(labels, s.size)
        if not s.size:
            return
        k = bin_index(s)
        self.pos += np.bincount(k[y], minlength=N_BINS)
        self.neg += np.bincount(k[~y], minlength=N_BINS)
        hit = s >= self.threshold
        tp = int(np.count_nonzero(hit & y))
        fp = int(np.count_nonzero(hit)) - tp
        fn = int(np.count_nonzero(y)) - tp
        self.tp += tp
        self.fp += fp
        self.fn += fn
        self.tn += s.size - tp - fp - fn
        p = np.clip(s, EPS, 1.0 - EPS)
        loss = -np.where(y, np.log(p), np.log1p(-p))
        brier = (s - y) ** 2
        for label, mask in ((0, ~y), (1, y)):
            ll, b = loss[mask], brier[mask]
            self.log_loss_sum[label] += ll.sum()
            self.log_loss_sq[label] += ll @ ll
            self.brier_sum[label] += b.sum()
            self.brier_sq[label] += b @ b
            self.score_sum[label] += s[mask].sum()

    def merge(self, other: BinaryCohort) -> None:
        """Merge ``other`` into this cohort (in place); ``other`` is not modified.

        Raises
        ------
        ValueError
            If the thresholds differ (their confusion counts do not add).
        """
        if other.threshold != self.threshold:
            raise ValueError(f"cannot merge cohorts with thresholds {self.threshold} and {other.threshold}")
        for name in ("pos", "neg", "predicted", "log_loss_sum", "log_loss_sq",
                     "brier_sum", "brier_sq", "score_sum"):
            mine = getattr(self, name)
            mine += getattr(other, name)
        self.tp += other.tp
        self.fp += other.fp
        self.tn += other.tn
        self.fn += other.fn

    # -- counts ---------------------------------------------------------------
    @property
    def n(self) -> int:
        """Labeled examples."""
        return self.tp + self.fp + self.tn + self.fn

    @property
    def n_pos(self) -> int:
        """Labeled positives."""
        return self.tp + self.fn

    @property
    def n_neg(self) -> int:
        """Labeled negatives."""
        return self.fp + self.tn

    @property
    def n_predictions(self) -> int:
        """Predictions counted by :meth:`add_predictions`."""
        return int(self.predicted.sum())

    @property
    def n_correct(self) -> int:
        """Labeled examples classified correctly at the threshold (tp + tn)."""
        return self.tp + self.tn

    # -- metrics --------------------------------------------------------------
    def roc_auc(self) -> Metric:
        """Area under the ROC curve from the per-label histograms.

        Returns
        -------
        Metric
            Undefined (``reason="single class"``) when either label is absent,
            never 0.0 or 0.5. ``error_bound`` is the binning bound below.

        Notes
        -----
        Mann-Whitney with pairs in the same bin counted one half
        (Hanley & McNeil 1982, eq. 1; ties as in Bamber 1975):

            AUC = sum_b pos_b (N_{<b} + neg_b / 2) / (P N),   N_{<b} = sum_{c<b} neg_c

        and |AUC - AUC_raw| <= 0.5 sum_b pos_b neg_b / (P N) (only pairs sharing
        a bin may be ordered differently in the raw scores).

        References
        ----------
        Hanley, J. A. & McNeil, B. J. (1982). The meaning and use of the area
        under a receiver operating characteristic (ROC) curve. Radiology 143(1).
        Bamber, D. (1975). The area above the ordinal dominance graph and the
        area below the receiver operating characteristic graph. J. Math. Psych. 12.

        Examples
        --------
        >>> c = BinaryCohort()
        >>> c.add([0.2, 0.6, 0.3, 0.9], [0, 0, 1, 1])
        >>> c.roc_auc().value
        0.75
        >>> c2 = BinaryCohort(); c2.add([0.2, 0.6], [1, 1]); c2.roc_auc().reason
        'single class'
        """
        n, p, q = self.n, self.n_pos, self.n_neg
        if n == 0:
            return undefined(NO_LABELS)
        if p == 0 or q == 0:
            return undefined("single class", n)
        pos = self.pos.astype(np.float64)
        neg = self.neg.astype(np.float64)
        below = np.cumsum(neg) - neg
        pairs = float(p) * float(q)
        auc = float(pos @ (below + 0.5 * neg)) / pairs
        bound = 0.5 * float(pos @ neg) / pairs
        return Metric(min(max(auc, 0.0), 1.0), "", n, bound)

    def average_precision(self) -> Metric:
        """Average precision, with each grid bin as one threshold.

        Returns
        -------
        Metric
            Undefined (``"no positives"``) without labeled positives.
            ``error_bound`` is ``None``: the order of scores inside a bin is
            lost (measured against sklearn: 1e-4 for binormal scores, 3e-3
            for a fraud-like model with 1 % positives near score 1e-4).

        Notes
        -----
        AP = sum_k (R_k - R_{k-1}) P_k over the bins in decreasing score order,
        R_k and P_k the recall and precision of "score in bin k or above", as
        ``sklearn.metrics.average_precision_score`` (no interpolation; Manning,
        Raghavan & Schütze, "Introduction to Information Retrieval", 2008, sec. 8.4).

        Examples
        --------
        >>> c = BinaryCohort(); c.add([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
        >>> round(c.average_precision().value, 4)
        0.8333
        >>> BinaryCohort().average_precision().reason
        'no labeled examples'
        """
        n, p = self.n, self.n_pos
        if n == 0:
            return undefined(NO_LABELS)
        if p == 0:
            return undefined("no positives", n)
        pos, neg = self.pos[::-1], self.neg[::-1]
        keep = (pos + neg) > 0
        pos, neg = pos[keep].astype(np.float64), neg[keep].astype(np.float64)
        tp = np.cumsum(pos)
        precision = tp / (tp + np.cumsum(neg))
        return Metric(float(pos @ precision) / p, "", n, None)

    def log_loss(self) -> Metric:
        """Mean log loss (cross-entropy), exact.

        Notes
        -----
        LL = -(1/n) sum_i [y_i ln p_i + (1 - y_i) ln(1 - p_i)] with
        p_i = clip(s_i, eps, 1 - eps), eps = 2.2e-16 (float64 machine epsilon,
        as ``sklearn.metrics.log_loss``). Bishop, "Pattern Recognition and
        Machine Learning", 2006, sec. 4.3.2.

        Examples
        --------
        >>> c = BinaryCohort(); c.add([0.5, 0.5], [0, 1])
        >>> round(c.log_loss().value, 6)
        0.693147
        """
        if self.n == 0:
            return undefined(NO_LABELS)
        return Metric(float(self.log_loss_sum.sum()) / self.n, "", self.n)

    def brier_score(self) -> Metric:
        """Mean Brier score, exact.

        Notes
        -----
        BS = (1/n) sum_i (s_i - y_i)^2 (Brier, "Verification of forecasts
        expressed in terms of probability", Monthly Weather Review 78, 1950).

        Examples
        --------
        >>> c = BinaryCohort(); c.add([0.8, 0.4], [1, 0])
        >>> round(c.brier_score().value, 6)
        0.1
        """
        if self.n == 0:
            return undefined(NO_LABELS)
        return Metric(float(self.brier_sum.sum()) / self.n, "", self.n)

    def calibration(self, n_bins: int = 10) -> Calibration:
        """Expected calibration error with ``n_bins`` equal-width bins, and the reliability table.

        Parameters
        ----------
        n_bins : int
            Equal-width bins over [0, 1], 1 <= n_bins <= 4000 (default 10).

        Returns
        -------
        Calibration
            ``ece`` undefined without labeled examples; ``bins`` always has
            ``n_bins`` entries, empty ones included.

        Raises
        ------
        ValueError
            If ``n_bins`` is out of range.

        Notes
        -----
        ECE = sum_j (n_j / n) |o_j - e_j|, o_j the share of positives and e_j
        the mean score in bin j (Naeini, Cooper & Hauskrecht, "Obtaining well
        calibrated probabilities using Bayesian binning", AAAI 2015; Guo et
        al., "On calibration of modern neural networks", ICML 2017). Each grid
        bin goes to the calibration bin holding its midpoint and e_j uses grid
        midpoints, so when ``n_bins`` divides 4000 (10, 20, 25, 40, 50, 100,
        ...) the bins are exact and ECE is within ``error_bound`` = 1.25e-4
        (half a grid bin) of ECE on the raw scores; for other ``n_bins`` a grid
        bin straddling a calibration edge is assigned whole and no bound is
        given (``error_bound`` None).

        Examples
        --------
        >>> c = BinaryCohort(); c.add([0.05, 0.05, 0.95, 0.95], [0, 1, 1, 1])
        >>> cal = c.calibration(10)
        >>> round(cal.ece.value, 3), len(cal.bins), cal.bins[1].count, cal.bins[1].mean_score
        (0.25, 10, 0, None)
        """
        if not 1 <= n_bins <= UNIFORM_BINS:
            raise ValueError(f"n_bins must be in [1, {UNIFORM_BINS}], got {n_bins}")
        j = np.minimum((MIDPOINTS * n_bins).astype(np.int64), n_bins - 1)
        pos = self.pos.astype(np.float64)
        tot = pos + self.neg
        count = np.bincount(j, weights=tot, minlength=n_bins)
        n_pos = np.bincount(j, weights=pos, minlength=n_bins)
        score = np.bincount(j, weights=tot * MIDPOINTS, minlength=n_bins)
        bins = []
        gap = 0.0
        for b in range(n_bins):
            c = int(round(count[b]))
            if c:
                e, o = float(score[b] / count[b]), float(n_pos[b] / count[b])
                gap += count[b] * abs(o - e)
                bins.append(CalibrationBin(b / n_bins, (b + 1) / n_bins, c, e, o))
            else:
                bins.append(CalibrationBin(b / n_bins, (b + 1) / n_bins, 0, None, None))
        if self.n == 0:
            ece = undefined(NO_LABELS)
        else:
            bound = MAX_WIDTH / 2 if UNIFORM_BINS % n_bins == 0 else None
            ece = Metric(float(gap) / self.n, "", self.n, bound)
        return Calibration(ece, tuple(bins))

    def ece(self, n_bins: int = 10) -> Metric:
        """Expected calibration error alone; see :meth:`calibration`.

        Examples
        --------
        >>> c = BinaryCohort(); c.add([0.25, 0.25, 0.25, 0.25], [0, 0, 0, 1])
        >>> e = c.ece()  # perfectly calibrated; off by the midpoint of the grid bin [0.25, 0.25025)
        >>> round(e.value, 6), e.error_bound
        (0.000125, 0.000125)
        """
        return self.calibration(n_bins).ece

    def precision(self) -> Metric:
        """tp / (tp + fp) at the threshold; undefined with no predicted positives.

        Examples
        --------
        >>> c = BinaryCohort(0.5); c.add([0.9, 0.8, 0.2], [1, 0, 1])
        >>> c.precision().value, c.recall().value, c.f1().value
        (0.5, 0.5, 0.5)
        """
        return ratio(self.tp, self.tp + self.fp, "no predicted positives", self.n)

    def recall(self) -> Metric:
        """tp / (tp + fn) at the threshold (true-positive rate); undefined with no positives."""
        return ratio(self.tp, self.tp + self.fn, "no positives", self.n)

    def f1(self) -> Metric:
        """F1 = 2 tp / (2 tp + fp + fn) at the threshold.

        Undefined only when there are neither positives nor predicted
        positives; 0.0 when one side exists but tp = 0 (as sklearn's
        ``f1_score``, whose ``zero_division`` applies only to that 0/0 case).
        """
        return ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn,
                     "no positives and no predicted positives", self.n)

    def accuracy(self) -> Metric:
        """(tp + tn) / n at the threshold."""
        return ratio(self.n_correct, self.n, NO_LABELS, self.n)

    def positive_rate(self) -> Metric:
        """Share of labeled examples whose label is positive (prevalence)."""
        return ratio(self.n_pos, self.n, NO_LABELS, self.n)

    def predicted_positive_rate(self) -> Metric:
        """Share of labeled examples predicted positive at the threshold."""
        return ratio(self.tp + self.fp, self.n, NO_LABELS, self.n)

    def mean_score(self) -> Metric:
        """Mean score of the labeled examples (compare with :meth:`positive_rate`).

        Examples
        --------
        >>> c = BinaryCohort(); c.add([0.2, 0.4], [0, 1])
        >>> round(c.mean_score().value, 3), c.positive_rate().value
        (0.3, 0.5)
        """
        return ratio(float(self.score_sum.sum()), self.n, NO_LABELS, self.n)

    # -- serialisation ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data (ints, floats, lists, str) for MessagePack or JSON; see :meth:`from_dict`.

        Histograms are stored sparsely (:func:`detectors.performance.grid.sparse`).
        """
        return {
            "grid": GRID_ID,
            "threshold": self.threshold,
            "pos": sparse(self.pos),
            "neg": sparse(self.neg),
            "predicted": sparse(self.predicted),
            "confusion": [self.tp, self.fp, self.tn, self.fn],
            "log_loss": self.log_loss_sum.tolist(),
            "log_loss_sq": self.log_loss_sq.tolist(),
            "brier": self.brier_sum.tolist(),
            "brier_sq": self.brier_sq.tolist(),
            "score": self.score_sum.tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BinaryCohort:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        ValueError
            If the data was built on another grid or is inconsistent
            (histogram totals that disagree with the confusion counts).
        """
        if d.get("grid") != GRID_ID:
            raise ValueError(f"cohort built on grid {d.get('grid')!r}, this build uses {GRID_ID!r}")
        c = cls(d["threshold"])
        c.pos, c.neg, c.predicted = dense(d["pos"]), dense(d["neg"]), dense(d["predicted"])
        c.tp, c.fp, c.tn, c.fn = (int(v) for v in d["confusion"])
        if int(c.pos.sum()) != c.n_pos or int(c.neg.sum()) != c.n_neg:
            raise ValueError("histogram totals disagree with the confusion counts")
        for name, key in (("log_loss_sum", "log_loss"), ("log_loss_sq", "log_loss_sq"),
                          ("brier_sum", "brier"), ("brier_sq", "brier_sq"), ("score_sum", "score")):
            setattr(c, name, np.asarray(d[key], dtype=np.float64).reshape(2).copy())
        return c
