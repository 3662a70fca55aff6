"""Vector (embedding) features in the record contract.

A feature may be a fixed-length numeric vector: a list or tuple of numbers, a
1-D numpy array or an ``array.array``. On the wire a vector is carried as its
float32 little-endian bytes (4 bytes per dimension), one MessagePack ``bin``
per record in the batch's ``vectors`` column group (:mod:`sdk.wire`), so a
384-dimensional embedding costs 1,539 bytes, not the ~3,500 of a list of
doubles.

What is refused, and how
------------------------
A bad vector drops that record's vector (it becomes missing), never the
record and never the batch; the drop is counted with its reason:

- ``wrong_type``: not a sequence of real numbers (e.g. a string inside it, a
  2-D array, a scalar in a column of vectors);
- ``vector_dimension``: fewer than :data:`MIN_VECTOR_DIM` or more than
  :data:`MAX_VECTOR_DIM` dimensions, or a length other than the feature's
  (declared at registration, else fixed by the first vector of the batch or
  window);
- ``not_finite``: a NaN or ±inf component, or one beyond float32 range.

This module needs neither numpy nor any other dependency (the SDK stays
light): lists go through :mod:`array`; numpy arrays are converted by their
own methods (a float32 numpy array is the fastest input: a few microseconds
on the client's worker thread, against ~10 times that for a list of 384
Python floats).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from typing import Any

from sdk.record import NOT_FINITE, VECTOR_DIMENSION, WRONG_TYPE, RecordError

MIN_VECTOR_DIM = 2
"""Fewest dimensions of a vector feature (a 1-dimensional vector is a number)."""
MAX_VECTOR_DIM = 4_096
"""Most dimensions of a vector feature (16 KiB a record on the wire)."""
BYTES_PER_DIM = 4  # float32
VECTOR_DROP_REASONS = ("vector_dimension", "vector_not_finite", "vector_wrong_type")
"""Reasons a vector is dropped from its record, as counted by the service (``records.rejected``
of the model's status for HTTP ingest, ``records.dead_lettered`` for the aggregator)."""

_SEQUENCES = (list, tuple, array)


def is_vector(value: Any) -> bool:
    """True when ``value`` is given as a vector (list, tuple, array.array or numpy array).

    Examples
    --------
    >>> is_vector([0.1, 0.2]), is_vector(0.1), is_vector("ab")
    (True, False, False)
    """
    return isinstance(value, _SEQUENCES) or type(value).__name__ == "ndarray"


def vector_bytes(value: Any, name: str, dim: int | None = None) -> bytes:
    """A vector as float32 little-endian bytes, validated.

    Parameters
    ----------
    value : list, tuple, array.array or 1-D numpy array of real numbers
    name : str
        The feature name (for the error's field, ``features.<name>``).
    dim : int, optional
        The required length; any length in ``[MIN_VECTOR_DIM, MAX_VECTOR_DIM]`` if None.

    Returns
    -------
    bytes
        ``4 * len(value)`` bytes.

    Raises
    ------
    RecordError
        ``wrong_type``, ``vector_dimension`` or ``not_finite`` (see the module docs).

    Examples
    --------
    >>> len(vector_bytes([0.5, -1.0, 2.0], "emb"))
    12
    >>> vector_bytes([0.5, float("nan")], "emb")
    Traceback (most recent call last):
    ...
    sdk.record.RecordError: features.emb: vector components must be finite (NaN, inf or beyond float32 range)
    """
    field = f"features.{name}"
    if type(value).__name__ == "ndarray":
        if getattr(value, "ndim", None) != 1 or value.dtype.kind not in "fiu":
            raise RecordError(field, "a vector must be a 1-D array of real numbers", WRONG_TYPE)
        import numpy  # (imported already: the value is a numpy array)

        with numpy.errstate(over="ignore", invalid="ignore"):  # judged below, not warned about
            a32 = value.astype("<f4")
            finite = math.isfinite(a32.sum(dtype="f8"))  # NaN or inf make the sum so; f8 cannot overflow
        data = a32.tobytes()
    else:
        try:
            a = array("f", value)
        except (TypeError, OverflowError):
            raise RecordError(field, "a vector must hold real numbers only", WRONG_TYPE) from None
        finite = math.isfinite(sum(a))
        if bytes_order_swapped:
            a.byteswap()
        data = a.tobytes()
    _check_dimension(len(data) // BYTES_PER_DIM, field, dim)
    if not finite:
        raise RecordError(field, _NOT_FINITE_MESSAGE, NOT_FINITE)
    return data


def check_vector_bytes(data: Any, name: str, dim: int | None = None) -> int:
    """Check a vector's wire bytes: the dimension it encodes, and that every component is finite.

    Returns
    -------
    int
        The dimension, ``len(data) // 4``.

    Raises
    ------
    RecordError
        ``wrong_type`` (not bytes, or a length that is no multiple of 4),
        ``vector_dimension`` or ``not_finite``.
    """
    field = f"features.{name}"
    if not isinstance(data, bytes) or len(data) % BYTES_PER_DIM:
        raise RecordError(field, "a vector on the wire is float32 bytes (4 per dimension)", WRONG_TYPE)
    d = len(data) // BYTES_PER_DIM
    _check_dimension(d, field, dim)
    if not _all_finite(data):
        raise RecordError(field, _NOT_FINITE_MESSAGE, NOT_FINITE)
    return d


_NOT_FINITE_MESSAGE = "vector components must be finite (NaN, inf or beyond float32 range)"


def _check_dimension(d: int, field: str, dim: int | None) -> None:
    if dim is not None and d != dim:
        raise RecordError(field, f"vector of {d} dimensions, the feature has {dim}", VECTOR_DIMENSION)
    if not MIN_VECTOR_DIM <= d <= MAX_VECTOR_DIM:
        raise RecordError(field, f"vector of {d} dimensions (allowed: {MIN_VECTOR_DIM} to "
                                 f"{MAX_VECTOR_DIM})", VECTOR_DIMENSION)


def vector_values(data: bytes) -> list[float]:
    """The components of a vector's wire bytes, as Python floats.

    Examples
    --------
    >>> vector_values(vector_bytes((1, 2.5), "v"))
    [1.0, 2.5]
    """
    a = array("f")
    a.frombytes(_swap(data) if bytes_order_swapped else data)
    return a.tolist()


def _all_finite(data: bytes) -> bool:
    """Whether every float32 of ``data`` is finite: their float64 sum is (a NaN or inf makes it
    NaN or inf; 4,096 finite float32 values cannot overflow a double)."""
    a = array("f")
    a.frombytes(data)
    if bytes_order_swapped:
        a.byteswap()
    return math.isfinite(sum(a))


def _swap(data: bytes) -> bytes:
    a = array("f")
    a.frombytes(data)
    a.byteswap()
    return a.tobytes()


bytes_order_swapped = array("H", [1]).tobytes() != b"\x01\x00"
"""True on a big-endian machine: the wire is little-endian."""


def drop_reason(exc: RecordError) -> str:
    """The counted reason of a dropped vector: one of :data:`VECTOR_DROP_REASONS`.

    Examples
    --------
    >>> drop_reason(RecordError("features.e", "NaN", NOT_FINITE))
    'vector_not_finite'
    """
    return exc.reason if exc.reason == VECTOR_DIMENSION else f"vector_{exc.reason}"


def split_vectors(features: dict[str, list[Any]], dims: Mapping[str, int] | None = None
                  ) -> tuple[dict[str, list[bytes | None]], list[tuple[int, RecordError]]]:
    """Move the vector columns out of ``features`` (in place) as wire bytes.

    A column is a vector column when one of its values is a vector
    (:func:`is_vector`). Its length is ``dims[name]`` when given, else the length
    of its first valid vector. A bad value becomes None (the record keeps its
    other values) and is reported.

    Parameters
    ----------
    features : dict[str, list]
        Feature columns (index i is record i); the vector columns are removed.
    dims : Mapping[str, int], optional
        Declared lengths by feature.

    Returns
    -------
    vectors : dict[str, list[bytes | None]]
        Per vector feature, each record's float32 bytes (None: missing or dropped).
    dropped : list[tuple[int, RecordError]]
        ``(record index, why)`` of each vector dropped.

    Examples
    --------
    >>> f = {"x": [1.0, 2.0], "emb": [[0.0, 1.0], [1.0]]}
    >>> vectors, dropped = split_vectors(f)
    >>> list(f), [v is None for v in vectors["emb"]], dropped[0][1].reason
    (['x'], [False, True], 'vector_dimension')
    """
    vectors: dict[str, list[bytes | None]] = {}
    dropped: list[tuple[int, RecordError]] = []
    for name in [k for k, col in features.items() if any(map(is_vector, col))]:
        col = features.pop(name)
        dim = None if dims is None else dims.get(name)
        out: list[bytes | None] = [None] * len(col)
        for i, v in enumerate(col):
            if v is None:
                continue
            try:
                if not is_vector(v):
                    raise RecordError(f"features.{name}", f"a {type(v).__name__} in a vector feature",
                                      WRONG_TYPE)
                out[i] = b = vector_bytes(v, name, dim)
                dim = len(b) // BYTES_PER_DIM
            except RecordError as exc:
                dropped.append((i, exc))
        vectors[name] = out
    dropped.sort(key=lambda e: e[0])
    return vectors, dropped


def check_vector_column(col: list[Any], name: str, dim: int | None = None
                        ) -> tuple[list[bytes | None], list[tuple[int, RecordError]]]:
    """Validate a wire column of vectors: each value float32 bytes of one length, or nil.

    The length is ``dim`` when given, else that of the column's first valid vector.

    Returns
    -------
    column : list[bytes | None]
        The column with each bad value replaced by None.
    dropped : list[tuple[int, RecordError]]
        ``(record index, why)`` of each vector dropped.
    """
    dropped: list[tuple[int, RecordError]] = []
    lengths = set(map(len, filter(None, col))) if all(v is None or type(v) is bytes for v in col) else None
    if lengths is not None and len(lengths) <= 1 and (dim is None or lengths <= {dim * BYTES_PER_DIM}):
        d = next(iter(lengths), 0) // BYTES_PER_DIM
        if not lengths or (MIN_VECTOR_DIM <= d <= MAX_VECTOR_DIM and not next(iter(lengths)) % BYTES_PER_DIM):
            return col, dropped  # finiteness is checked where the vectors are read (sketches.vector)
    out = list(col)
    for i, v in enumerate(col):
        if v is None:
            continue
        try:
            dim = check_vector_bytes(v, name, dim)
        except RecordError as exc:
            out[i] = None
            dropped.append((i, exc))
    return out, dropped
