"""Packed feature columns of wire schema version 3 (:mod:`sdk.wire`).

A feature column of a version-3 message is a MessagePack array of values, as in version 2,
or one of two packed forms that spare the reader a Python object per value:

``{"f8": bytes}``
    A column of floats only: its ``n`` values as little-endian IEEE 754 doubles (``8 n``
    bytes; NaN and infinities are values as in an array column). Decoded as a float64
    :class:`numpy.ndarray`.
``{"s": [string or nil, ...], "i": bytes}``
    A column of strings and nulls, dictionary-encoded: value ``k`` is ``s[codes[k]]``, the
    codes little-endian unsigned integers of one width (1, 2 or 4 bytes: ``len(i) / n``).
    Decoded as a :class:`DictionaryColumn`: the reader validates and counts the dictionary,
    not every value (a categorical column repeats its values).

Any other column (integers, booleans, floats with nulls, mixed types) stays an array. The
writer chooses the form per column (:func:`pack_feature`); the reader accepts any of them
(:func:`unpack_feature`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from sdk.errors import BAD_ENVELOPE, WireError
from sdk.record import MAX_STRING_LENGTH, RecordError, check_feature_value

_NONE = type(None)
_STR_OR_NONE = frozenset({str, _NONE})
_WIDTHS = {1: "<u1", 2: "<u2", 4: "<u4"}


class DictionaryColumn(Sequence):
    """A column of strings and None stored as a dictionary and one code per value.

    Parameters
    ----------
    values : list of (str or None)
        The dictionary.
    codes : numpy.ndarray
        Unsigned integers, one per row, each an index into ``values``.

    Examples
    --------
    >>> col = DictionaryColumn(["a", None], np.array([0, 1, 0], dtype=np.uint8))
    >>> len(col), col[2], list(col[1:]), col.counts()
    (3, 'a', [None, 'a'], {'a': 2, None: 1})
    """

    __slots__ = ("codes", "values")

    def __init__(self, values: list[str | None], codes: np.ndarray) -> None:
        self.values = values
        self.codes = codes

    def __len__(self) -> int:
        return self.codes.size

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return DictionaryColumn(self.values, self.codes[i])
        return self.values[self.codes[i]]

    def __iter__(self) -> Iterator[str | None]:
        values = self.values
        return iter([values[c] for c in self.codes.tolist()])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DictionaryColumn | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  (mutable like the list it stands for)

    def __repr__(self) -> str:
        return f"DictionaryColumn({list(self)!r})"

    def take(self, rows: Sequence[int] | np.ndarray) -> DictionaryColumn:
        """The values at ``rows`` (indices), still dictionary-encoded."""
        return DictionaryColumn(self.values, self.codes[np.asarray(rows, dtype=np.intp)])

    def counts(self) -> dict[str | None, int]:
        """How often each value occurs (values that do not occur left out; a value the
        dictionary lists twice counted once, with both entries' counts)."""
        counts = np.bincount(self.codes, minlength=len(self.values))
        present = np.flatnonzero(counts).tolist()
        values = list(map(self.values.__getitem__, present))
        out = dict(zip(values, counts[present].tolist(), strict=True))
        if len(out) < len(values):  # a value listed twice: its counts added
            out = {}
            for value, c in zip(values, counts[present].tolist(), strict=True):
                out[value] = out.get(value, 0) + c
        return out


def dictionary_encode(col: Sequence[str | None]) -> DictionaryColumn:
    """A column of strings and None as a :class:`DictionaryColumn` (dictionary in order of
    first occurrence, codes of the smallest width that holds them)."""
    values = list(dict.fromkeys(col))
    index = {v: k for k, v in enumerate(values)}
    return DictionaryColumn(values, np.array(list(map(index.__getitem__, col)),
                                             dtype=_code_dtype(len(values))))


def pack_feature(col: Any) -> Any:
    """The wire value of one feature column: a packed form where one applies, else the
    column as a list (module docstring)."""
    if isinstance(col, DictionaryColumn):
        return _pack_dictionary(col)
    if isinstance(col, np.ndarray):
        return {"f8": col.astype("<f8").tobytes()} if col.dtype.kind == "f" else col.tolist()
    if not col:
        return col
    types = set(map(type, col))
    if types == {float}:
        return {"f8": np.array(col, dtype="<f8").tobytes()}
    if str in types and types <= _STR_OR_NONE:
        return _pack_dictionary(dictionary_encode(col))
    return col


def _code_dtype(n_values: int) -> str:
    """The narrowest code type for a dictionary of ``n_values``."""
    return _WIDTHS[1 if n_values <= 1 << 8 else 2 if n_values <= 1 << 16 else 4]


def _pack_dictionary(col: DictionaryColumn) -> dict[str, Any]:
    return {"s": col.values, "i": col.codes.astype(_code_dtype(len(col.values))).tobytes()}


def unwire(col: Any) -> Any:
    """A feature column as a MessagePack array of values (schema version 2)."""
    if isinstance(col, np.ndarray):
        return col.tolist()
    return list(col) if isinstance(col, DictionaryColumn) else col


def unpack_feature(raw: dict, name: str, n: int, bad: dict[int, RecordError]
                   ) -> tuple[np.ndarray | DictionaryColumn, frozenset[type], set[str] | None]:
    """Decode and validate one packed feature column of ``n`` values.

    Returns
    -------
    column : numpy.ndarray or DictionaryColumn
    types : frozenset of type
        The types of its values (of the valid ones, for a dictionary column).
    distinct : set of str or None
        A dictionary column's strings (None for a float column).

    A dictionary entry that is not a valid feature string (too long, or not a string or nil)
    makes the records holding it invalid: their index and error go to ``bad``.

    Raises
    ------
    sdk.errors.WireError
        If the packed column does not hold ``n`` values of its form.
    """
    where = f"column features.{name}"
    if raw.keys() == {"f8"} and isinstance(raw["f8"], bytes):
        if len(raw["f8"]) != 8 * n:
            raise WireError(BAD_ENVELOPE, f"{where} must pack {n} doubles")
        return np.frombuffer(raw["f8"], dtype="<f8"), frozenset({float}), None
    if raw.keys() != {"s", "i"} or not isinstance(raw["s"], list) or not isinstance(raw["i"], bytes):
        raise WireError(BAD_ENVELOPE, f"{where} must be an array, {{f8}} or {{s, i}}")
    values, packed = raw["s"], raw["i"]
    width = len(packed) // n if n else 1
    if width not in _WIDTHS or width * n != len(packed):
        raise WireError(BAD_ENVELOPE, f"{where} must pack {n} codes of 1, 2 or 4 bytes")
    codes = np.frombuffer(packed, dtype=_WIDTHS[width])
    if codes.size and int(codes.max()) >= len(values):
        raise WireError(BAD_ENVELOPE, f"{where} holds a code beyond its dictionary")
    col = DictionaryColumn(values, codes)
    types = frozenset(map(type, values))
    if types <= _STR_OR_NONE and max(map(len, filter(None, values)), default=0) <= MAX_STRING_LENGTH:
        return col, types, set(filter(None, values))
    for k, v in enumerate(values):
        try:
            if type(v) is not str and v is not None:
                raise RecordError(f"features.{name}", "a dictionary column holds strings or null")
            check_feature_value(v, name)
        except RecordError as exc:
            for i in np.flatnonzero(codes == k).tolist():
                bad.setdefault(i, exc)
    return col, types & _STR_OR_NONE, {v for v in values if type(v) is str}
