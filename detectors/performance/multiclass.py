"""Label-joined performance of a multiclass classifier: the mergeable ``MulticlassCohort``."""

from __future__ import annotations

from typing import Any

import numpy as np

from detectors.performance.metric import Metric, ratio, undefined

Label = str | int | bool


def _sort_key(label: Label) -> tuple[str, Any]:
    return (type(label).__name__, label)


class MulticlassCohort:
    """Mergeable confusion matrix over the classes observed so far.

    Classes are whatever labels appear as a true or a predicted class (str,
    int or bool; two labels that compare equal in Python, such as 1 and
    True, are one class). Cohorts with different class sets merge: the
    result covers the union.

    Attributes
    ----------
    classes : list
        Observed classes, sorted (grouped by type name, then by value).
    n : int
        Labeled examples.

    Notes
    -----
    C[i, j] counts examples of true class i predicted as class j (rows true,
    columns predicted, as ``sklearn.metrics.confusion_matrix``). Merging adds
    the matrices cell by cell, so it is exact, associative and commutative.

    Examples
    --------
    >>> c = MulticlassCohort()
    >>> c.add(["cat", "dog", "dog", "bird"], ["cat", "dog", "cat", "bird"])
    >>> c.classes, c.accuracy().value
    (['bird', 'cat', 'dog'], 0.75)
    >>> c.confusion_matrix().tolist()
    [[1, 0, 0], [0, 1, 0], [0, 1, 1]]
    >>> round(c.f1_macro().value, 4)
    0.7778
    """

    __slots__ = ("_index", "_labels", "_matrix")

    def __init__(self) -> None:
        self._labels: list[Label] = []
        self._index: dict[Label, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.int64)

    # -- building -------------------------------------------------------------
    def _indices(self, labels: list[Label]) -> np.ndarray:
        for lab in labels:
            if not isinstance(lab, str | int | bool):
                raise ValueError(f"class labels must be str, int or bool, got {type(lab).__name__}")
            if lab not in self._index:
                self._index[lab] = len(self._labels)
                self._labels.append(lab)
        k = len(self._labels)
        if self._matrix.shape[0] < k:
            grown = np.zeros((k, k), dtype=np.int64)
            m = self._matrix.shape[0]
            grown[:m, :m] = self._matrix
            self._matrix = grown
        return np.fromiter((self._index[lab] for lab in labels), np.int64, len(labels))

    def add(self, y_true: Any, y_pred: Any) -> None:
        """Add labeled examples (vectorised: one dictionary look-up per distinct class).

        Parameters
        ----------
        y_true, y_pred : array-like, shape (n,)
            True and predicted classes (str, int or bool values). Each is
            converted with ``numpy.asarray``, so a list mixing numbers and
            strings becomes strings (numpy's rule): keep one type per model.

        Raises
        ------
        ValueError
            If the lengths differ, or a label is None, NaN or of another type.
        """
        t, p = np.asarray(y_true).ravel(), np.asarray(y_pred).ravel()
        if t.size != p.size:
            raise ValueError(f"got {t.size} true labels but {p.size} predictions")
        if not t.size:
            return
        try:
            ut, it = np.unique(t, return_inverse=True)
            up, ip = np.unique(p, return_inverse=True)
        except TypeError as e:  # object arrays mixing types that do not compare, or None
            raise ValueError(f"class labels must be str, int or bool: {e}") from None
        gt = self._indices(ut.tolist())[it.ravel()]
        gp = self._indices(up.tolist())[ip.ravel()]
        k = len(self._labels)
        self._matrix += np.bincount(gt * k + gp, minlength=k * k).reshape(k, k)

    def merge(self, other: MulticlassCohort) -> None:
        """Merge ``other`` into this cohort (in place); class sets may differ."""
        idx = self._indices(list(other._labels))
        m = other._matrix.shape[0]
        self._matrix[np.ix_(idx[:m], idx[:m])] += other._matrix

    # -- reading --------------------------------------------------------------
    @property
    def classes(self) -> list[Label]:
        """Observed classes, sorted."""
        return sorted(self._labels, key=_sort_key)

    @property
    def n(self) -> int:
        """Labeled examples."""
        return int(self._matrix.sum())

    @property
    def n_correct(self) -> int:
        """Correctly classified examples (the trace)."""
        return int(np.trace(self._matrix))

    def confusion_matrix(self, labels: list[Label] | None = None) -> np.ndarray:
        """Dense int64 confusion matrix, rows true, columns predicted.

        Parameters
        ----------
        labels : list, optional
            Class order (default :attr:`classes`); classes never observed get
            zero rows and columns.

        Examples
        --------
        >>> c = MulticlassCohort(); c.add([0, 1], [1, 1])
        >>> c.confusion_matrix([1, 0, 2]).tolist()
        [[1, 0, 0], [1, 0, 0], [0, 0, 0]]
        """
        order = self.classes if labels is None else list(labels)
        idx = np.array([self._index.get(lab, -1) for lab in order], dtype=np.int64)
        padded = np.zeros((len(self._labels) + 1, len(self._labels) + 1), dtype=np.int64)
        padded[:-1, :-1] = self._matrix  # index -1 reads the zero row / column
        return padded[np.ix_(idx, idx)]

    def confusion_dict(self) -> dict[Label, dict[Label, int]]:
        """``{true: {predicted: count}}`` over the non-zero cells.

        Examples
        --------
        >>> c = MulticlassCohort(); c.add(["a", "a", "b"], ["a", "b", "b"])
        >>> c.confusion_dict()
        {'a': {'a': 1, 'b': 1}, 'b': {'b': 1}}
        """
        out: dict[Label, dict[Label, int]] = {}
        for t in self.classes:
            i = self._index[t]
            row = {p: int(self._matrix[i, self._index[p]]) for p in self.classes
                   if self._matrix[i, self._index[p]]}
            if row:
                out[t] = row
        return out

    def accuracy(self) -> Metric:
        """Share of examples whose predicted class is the true class.

        Examples
        --------
        >>> MulticlassCohort().accuracy().reason
        'no labeled examples'
        """
        return ratio(self.n_correct, self.n, "no labeled examples", self.n)

    def per_class_f1(self, labels: list[Label] | None = None) -> dict[Label, float]:
        """F1 of each class, ``2 tp / (2 tp + fp + fn)``, 0.0 where that is 0/0.

        Examples
        --------
        >>> c = MulticlassCohort(); c.add(["a", "b"], ["a", "a"])
        >>> {k: round(v, 3) for k, v in c.per_class_f1().items()}
        {'a': 0.667, 'b': 0.0}
        """
        order = self.classes if labels is None else list(labels)
        m = self.confusion_matrix(order)
        tp = np.diag(m).astype(np.float64)
        den = 2 * tp + (m.sum(axis=0) - tp) + (m.sum(axis=1) - tp)
        f1 = np.divide(2 * tp, den, out=np.zeros_like(tp), where=den > 0)
        return dict(zip(order, f1.tolist(), strict=True))

    def f1_macro(self, labels: list[Label] | None = None) -> Metric:
        """Unweighted mean of the per-class F1 scores.

        Parameters
        ----------
        labels : list, optional
            Classes to average over (default: every observed class).

        Returns
        -------
        Metric
            Undefined without labeled examples (or with ``labels`` empty).

        Notes
        -----
        F1_c = 2 tp_c / (2 tp_c + fp_c + fn_c); macro-F1 = mean_c F1_c
        (Sokolova & Lapalme, "A systematic analysis of performance measures
        for classification tasks", Inf. Process. Manage. 45, 2009). As
        ``sklearn.metrics.f1_score(average="macro", zero_division=0)``: a
        class with predictions but no support, or support but no correct
        prediction, scores 0; a class listed in ``labels`` with neither
        support nor predictions (0/0) also scores 0 and still counts in the
        mean. Every observed class has support or predictions, so with the
        default ``labels`` no 0/0 arises.

        Examples
        --------
        >>> c = MulticlassCohort(); c.add([0, 0, 1], [0, 1, 1])
        >>> round(c.f1_macro().value, 4), round(c.f1_macro([0, 1, 2]).value, 4)
        (0.6667, 0.4444)
        """
        if self.n == 0:
            return undefined("no labeled examples")
        f1 = self.per_class_f1(labels)
        if not f1:
            return undefined("no classes to average", self.n)
        return Metric(float(np.mean(list(f1.values()))), "", self.n)

    # -- serialisation ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data for MessagePack or JSON: classes and the non-zero cells as ``[i, j, count]``.

        Examples
        --------
        >>> c = MulticlassCohort(); c.add(["a", "b"], ["a", "a"])
        >>> c.to_dict()
        {'classes': ['a', 'b'], 'cells': [[0, 0, 1], [1, 0, 1]]}
        """
        i, j = np.nonzero(self._matrix)
        cells = [[int(a), int(b), int(self._matrix[a, b])] for a, b in zip(i, j, strict=True)]
        return {"classes": list(self._labels), "cells": cells}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MulticlassCohort:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        ValueError
            If the classes repeat, or a cell names a class index out of range
            or has a negative count.
        """
        c = cls()
        c._indices(list(d["classes"]))
        k = len(c._labels)
        if k != len(d["classes"]):
            raise ValueError("duplicate classes")
        for i, j, count in d["cells"]:
            if not (0 <= i < k and 0 <= j < k) or count < 0:
                raise ValueError(f"malformed confusion cell {[i, j, count]}")
            c._matrix[i, j] += count
        return c
