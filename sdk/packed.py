"""Packed columns of wire schema versions 3 and 4 (:mod:`sdk.wire`).

A feature column of a version-3 message is a MessagePack array of values, as in version 2,
or one of two packed forms that spare the reader a Python object per value (version 4 allows
them for ``model_version``, ``event_time``, ``score`` and ``latency_ms`` too):

``{"f8": bytes}``
    A column of floats only: its ``n`` values as little-endian IEEE 754 doubles (``8 n``
    bytes; NaN and infinities are values as in an array column). Decoded as an
    :class:`array.array` of doubles.
``{"s": [string or nil, ...], "i": bytes}``
    A column of strings and nulls, dictionary-encoded: value ``k`` is ``s[codes[k]]``, the
    codes little-endian unsigned integers of one width (1, 2 or 4 bytes: ``len(i) / n``).
    Decoded as a :class:`DictionaryColumn`: the reader validates and counts the dictionary,
    not every value (a categorical column repeats its values).

Any other column (integers, booleans, floats with nulls, mixed types) stays an array. The
writer chooses the form per column (:func:`pack_column`); the reader accepts any of them
(:func:`unpack_column`, :func:`unpack_feature`), and judges the values of a dictionary by its
column's rules as it would an array's (a version-4 ``event_time`` dictionary of numbers is
valid; a feature dictionary holds strings and nil only). Only the standard library: the SDK does not
depend on numpy (the profiles read these buffers as numpy arrays without a copy).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any

from sdk.errors import BAD_ENVELOPE, WireError
from sdk.record import MAX_STRING_LENGTH, RecordError, check_feature_value

_NONE = type(None)
_STR_OR_NONE = frozenset({str, _NONE})
_NONE_TYPE = frozenset({_NONE})
_STR_TYPE = frozenset({str})
_BIG_ENDIAN = sys.byteorder == "big"
_CODE_TYPES = {1: "B", 2: "H", 4: next(t for t in "IL" if array(t).itemsize == 4)}
"""The array type code of an unsigned code of each width in bytes."""


def _little_endian(a: array) -> array:
    """``a`` with its items in little-endian byte order (the wire's), in place."""
    if _BIG_ENDIAN:
        a.byteswap()
    return a


def _from_wire(typecode: str, data: bytes) -> array:
    a = array(typecode)
    a.frombytes(data)
    return _little_endian(a)


def _to_wire(a: array) -> bytes:
    if not _BIG_ENDIAN:
        return a.tobytes()
    return _little_endian(array(a.typecode, a)).tobytes()


def take(col: array, rows: Iterable[int]) -> array:
    """The items of ``col`` at ``rows`` (indices), as an array of the same type."""
    return array(col.typecode, map(col.__getitem__, rows))


def take_column(col: Any, rows: Sequence[int]) -> Any:
    """The values of a column at ``rows`` (indices), in the column's own form: a packed
    column stays packed, a numpy array stays an array (indexed by the list, without this
    module importing numpy), any other sequence becomes a list; None stays None."""
    if col is None:
        return None
    if isinstance(col, DictionaryColumn):
        return col.take(rows)
    if isinstance(col, array):
        return take(col, rows)
    if hasattr(col, "dtype"):
        return col[list(rows)]
    return [col[i] for i in rows]


def _code_type(n_values: int) -> str:
    """The narrowest code type for a dictionary of ``n_values``."""
    return _CODE_TYPES[1 if n_values <= 1 << 8 else 2 if n_values <= 1 << 16 else 4]


_ALL_BYTES = bytes(range(256))


def _code_beyond(packed: bytes, codes: array, size: int) -> bool:
    """Whether some code is ``size`` or more: for 1-byte codes, what is left of ``packed``
    once the bytes below ``size`` are deleted (one C pass, ~40x faster than ``max``)."""
    if codes.itemsize == 1:
        return size < 256 and bool(packed.translate(None, _ALL_BYTES[:size]))
    return max(codes) >= size


class DictionaryColumn(Sequence):
    """A column of strings and None stored as a dictionary and one code per value.

    Parameters
    ----------
    values : list of (str or None)
        The dictionary.
    codes : array.array
        Unsigned integers, one per row, each an index into ``values``.

    Examples
    --------
    >>> col = dictionary_encode(["a", None, "a"])
    >>> len(col), col[2], list(col[1:]), col.values, col.codes.tolist()
    (3, 'a', [None, 'a'], ['a', None], [0, 1, 0])
    """

    __slots__ = ("codes", "values")

    def __init__(self, values: list[str | None], codes: array) -> None:
        self.values = values
        self.codes = codes

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return DictionaryColumn(self.values, self.codes[i])
        return self.values[self.codes[i]]

    def __iter__(self) -> Iterator[str | None]:
        return map(self.values.__getitem__, self.codes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DictionaryColumn | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  (mutable like the list it stands for)

    def __repr__(self) -> str:
        return f"DictionaryColumn({list(self)!r})"

    def count(self, value: Any) -> int:
        """How many values equal ``value``: one pass over the codes, however many dictionary
        entries equal it (a producer may list a value many times).

        Examples
        --------
        >>> dictionary_encode(["a", None, "a"]).count("a")
        2
        >>> DictionaryColumn(["a", "b", "a"], array("B", [0, 1, 2, 2])).count("a")
        3
        """
        entries = [k for k, v in enumerate(self.values) if v == value]
        if len(entries) <= 1:
            return self.codes.count(entries[0]) if entries else 0
        return sum(map(frozenset(entries).__contains__, self.codes))

    def take(self, rows: Iterable[int]) -> DictionaryColumn:
        """The values at ``rows`` (indices), still dictionary-encoded."""
        return DictionaryColumn(self.values, take(self.codes, rows))


def dictionary_encode(col: Sequence[str | None], distinct: Collection[str | None] | None = None
                      ) -> DictionaryColumn:
    """A column of strings and None as a :class:`DictionaryColumn` (codes of the smallest
    width that holds them). The dictionary is ``distinct`` when given (values the column's
    are among), else the column's values in order of first occurrence."""
    values = list(dict.fromkeys(col) if distinct is None else distinct)
    index = dict(zip(values, range(len(values)), strict=True))
    return DictionaryColumn(values, array(_code_type(len(values)), map(index.__getitem__, col)))


def pack_column(col: Any, types: Collection[type] | None = None,
                distinct: Collection[str | None] | None = None) -> Any:
    """The wire value of one column: a packed form where one applies, else the column as a
    list (module docstring). ``types`` (the set of its values' types) and
    ``distinct`` (a collection its values are among), when the caller knows them from
    validation (:attr:`sdk.columns.RecordColumns.feature_types`, ``distinct``), spare a
    scan of the column."""
    if isinstance(col, DictionaryColumn):
        return _pack_dictionary(col)
    if isinstance(col, array):
        return {"f8": _to_wire(col)} if col.typecode == "d" else col.tolist()
    if not isinstance(col, list):  # a numpy array or another sequence
        col = col.tolist() if hasattr(col, "tolist") else list(col)
    if not col:
        return col
    types = set(map(type, col)) if types is None else types
    if types == {float}:
        return {"f8": _to_wire(array("d", col))}
    if str in types and types <= _STR_OR_NONE:
        return _pack_dictionary(dictionary_encode(col, distinct))
    return col


def _pack_dictionary(col: DictionaryColumn) -> dict[str, Any]:
    codes = col.codes
    typecode = _code_type(len(col.values))
    return {"s": col.values, "i": _to_wire(codes if codes.typecode == typecode else array(typecode, codes))}


def unwire(col: Any) -> Any:
    """A feature column as a MessagePack array of values (schema version 2)."""
    if isinstance(col, array):
        return col.tolist()
    if isinstance(col, DictionaryColumn):
        return list(col)
    return col.tolist() if hasattr(col, "tolist") else col


def unpack_column(raw: dict, name: str, n: int) -> array | DictionaryColumn:
    """The column of ``n`` values that the packed form ``raw`` holds (its values unchecked).

    Raises
    ------
    sdk.errors.WireError
        If ``raw`` is not a packed form of ``n`` values, naming the column ``name``.

    Examples
    --------
    >>> unpack_column(pack_column([1.5, 2.0]), "score", 2).tolist()
    [1.5, 2.0]
    >>> list(unpack_column(pack_column(["a", "b", "a"]), "model_version", 3))
    ['a', 'b', 'a']
    >>> unpack_column({"f8": b"12345678"}, "score", 2)
    Traceback (most recent call last):
    ...
    sdk.errors.WireError: column score must pack 2 doubles
    """
    where = f"column {name}"
    if raw.keys() == {"f8"} and isinstance(raw["f8"], bytes):
        if len(raw["f8"]) != 8 * n:
            raise WireError(BAD_ENVELOPE, f"{where} must pack {n} doubles")
        return _from_wire("d", raw["f8"])
    if raw.keys() != {"s", "i"} or not isinstance(raw["s"], list) or not isinstance(raw["i"], bytes):
        raise WireError(BAD_ENVELOPE, f"{where} must be an array, {{f8}} or {{s, i}}")
    values, packed = raw["s"], raw["i"]
    width = len(packed) // n if n else 1
    if width not in _CODE_TYPES or width * n != len(packed):
        raise WireError(BAD_ENVELOPE, f"{where} must pack {n} codes of 1, 2 or 4 bytes")
    codes = _from_wire(_CODE_TYPES[width], packed)
    if codes and _code_beyond(packed, codes, len(values)):
        raise WireError(BAD_ENVELOPE, f"{where} holds a code beyond its dictionary")
    return DictionaryColumn(values, codes)


def unpack_feature(raw: dict, name: str, n: int, bad: dict[int, RecordError]
                   ) -> tuple[array | DictionaryColumn, frozenset[type], Collection[str] | None]:
    """Decode and validate one packed feature column of ``n`` values.

    Returns
    -------
    column : array.array of doubles, or DictionaryColumn
    types : frozenset of type
        The types of its dictionary's entries (of the valid ones).
    distinct : collection of str or None
        A dictionary column's strings: the entries of its dictionary but nil (None for a
        column of doubles).

    A dictionary entry that is not a valid feature string (too long, or not a string or nil)
    makes the records holding it invalid: their index and error go to ``bad``.

    Raises
    ------
    sdk.errors.WireError
        If the packed column does not hold ``n`` values of its form.
    """
    col = unpack_column(raw, f"features.{name}", n)
    if isinstance(col, array):
        return col, frozenset({float}), None
    values, codes = col.values, col.codes
    strings = values if None not in values else [v for v in values if v is not None]
    try:  # one C-level pass that fails on any entry that is not a string (nor nil)
        joined = "".join(strings)
    except TypeError:
        joined = None
    if joined is not None and (len(joined) <= MAX_STRING_LENGTH
                               or max(map(len, strings)) <= MAX_STRING_LENGTH):
        if not strings:
            types = _NONE_TYPE if values else frozenset()
        else:
            types = _STR_OR_NONE if strings is not values else _STR_TYPE
        return col, types, strings
    invalid: dict[int, RecordError] = {}  # dictionary entry -> why it is invalid
    for k, v in enumerate(values):
        try:
            if type(v) is not str and v is not None:
                raise RecordError(f"features.{name}", "a dictionary column holds strings or null")
            check_feature_value(v, name)
        except RecordError as exc:
            invalid[k] = exc
    for i, code in enumerate(codes):  # one pass, however many entries are invalid
        if code in invalid:
            bad.setdefault(i, invalid[code])
    return col, frozenset(map(type, values)) & _STR_OR_NONE, {v for v in values if type(v) is str}
