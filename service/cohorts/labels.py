"""Label values as the cohorts count them: binary 0/1, multiclass class names, regression targets."""

from __future__ import annotations

import math
from typing import Any


def binary_label(value: Any) -> int | None:
    """0/1 from a bool, 0/1 number or "0"/"1"/"true"/"false"; None otherwise.

    Examples
    --------
    >>> binary_label(True), binary_label(0.0), binary_label("true"), binary_label(2)
    (1, 0, 1, None)
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.lower() in ("0", "1", "true", "false"):
        return int(value.lower() in ("1", "true"))
    return None


def class_name(value: Any) -> str | None:
    """A multiclass label or predicted class as the class name it is counted under.

    Booleans are ``"true"`` / ``"false"``, integers and integral floats their
    decimal form (so a label ``2`` and a class-probability key ``"2"`` are one
    class), non-empty strings themselves; anything else is not a class (None).

    Examples
    --------
    >>> class_name(True), class_name(2), class_name(2.0), class_name("cat"), class_name(2.5)
    ('true', '2', '2', 'cat', None)
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str) and value:
        return value
    return None


def regression_target(value: Any) -> float | None:
    """A regression label: a finite number that is not a bool (None otherwise).

    Examples
    --------
    >>> regression_target(3), regression_target(2.5), regression_target(True), regression_target("1")
    (3.0, 2.5, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None
