"""Tabular inputs (pandas DataFrames, numpy arrays, mappings of columns, rows of
dicts) as plain Python columns and rows, without importing pandas or numpy.

pandas missing values (NaN, None, ``pd.NA``) become None; numpy arrays keep
their NaN (a missing feature value under the record contract).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any


def column_list(values: Any) -> list[Any]:
    """One column as a list of Python values.

    Parameters
    ----------
    values : pandas.Series, numpy.ndarray (1-D) or iterable

    Returns
    -------
    list

    Examples
    --------
    >>> column_list((1, 2.5, None))
    [1, 2.5, None]
    """
    if hasattr(values, "to_numpy") and hasattr(values, "dtype"):  # pandas Series / Index
        return values.to_numpy(dtype=object, na_value=None).tolist()
    if hasattr(values, "tolist"):  # numpy array: numpy scalars become Python values
        return values.tolist()
    return list(values)


def feature_columns(data: Any, names: Sequence[str] | None = None) -> dict[str, list[Any]]:
    """Named columns of a table.

    Parameters
    ----------
    data : pandas.DataFrame, mapping of name -> column, or 2-D numpy array
        A 2-D array is rows x features and needs ``names``.
    names : sequence of str, optional
        Column names of a 2-D array (e.g. ``model.feature_names_in_``).

    Returns
    -------
    dict[str, list]

    Raises
    ------
    TypeError
        If ``data`` is none of the above, or a 2-D array comes without names.
    ValueError
        If ``names`` does not match the array's width.

    Examples
    --------
    >>> feature_columns({"x": [1.0, 2.0], "c": ("a", "b")})
    {'x': [1.0, 2.0], 'c': ['a', 'b']}
    """
    if hasattr(data, "columns") and hasattr(data, "iloc"):  # pandas DataFrame
        return {name: column_list(data[name]) for name in data.columns}
    if isinstance(data, Mapping):
        return {name: column_list(col) for name, col in data.items()}
    if getattr(data, "ndim", None) == 2:
        if names is None:
            raise TypeError("a 2-D array needs its column names")
        if len(names) != data.shape[1]:
            raise ValueError(f"{len(names)} names for {data.shape[1]} columns")
        return dict(zip(names, data.T.tolist(), strict=True))
    raise TypeError(f"expected a DataFrame, a mapping of columns or a 2-D array, got {type(data).__name__}")


def rows(data: Any, names: Sequence[str] | None = None) -> Iterator[dict[str, Any]]:
    """Rows of a table, or of an iterable of mappings, as dicts.

    Examples
    --------
    >>> list(rows({"x": [1, 2], "c": ["a", "b"]}))
    [{'x': 1, 'c': 'a'}, {'x': 2, 'c': 'b'}]
    >>> list(rows([{"x": 1}]))
    [{'x': 1}]
    """
    if isinstance(data, Mapping) or hasattr(data, "ndim") or hasattr(data, "iloc"):
        cols = feature_columns(data, names)
        for values in zip(*cols.values(), strict=True):
            yield dict(zip(cols, values, strict=True))
        return
    rows_in: Iterable[Mapping[str, Any]] = data
    for row in rows_in:
        yield dict(row)
