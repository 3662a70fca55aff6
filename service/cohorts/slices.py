"""Slices: how a slice is named in Redis and by people, and which feature values make one.

For each configured slice key, a prediction's value (its record's ``slices``
entry, else the feature of that name when it is a string, bool or integer)
gets a cohort of its own while fewer than ``max_slice_values`` values of the
key are admitted; further values share the cohort ``__other__`` (as the
capped slice sub-profiles of :mod:`sketches.slices`). Unlike a profile's
per-window cap, admission is per model and kept across windows, so a value's
cohorts are comparable with its baseline; within a batch the heaviest values
are admitted first, and a value unseen for ``slice_stale_seconds`` (event
time) gives its place up to a new one (:meth:`CohortStore.admit_slices
<service.cohorts.store.CohortStore.admit_slices>`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def slice_id(key: str, value: str) -> str:
    """The id of a slice in Redis: the compact JSON ``["<key>","<value>"]``.

    Examples
    --------
    >>> slice_id("country", "DE")
    '["country","DE"]'
    """
    return json.dumps([key, value], separators=(",", ":"), ensure_ascii=False)


def parse_slice_id(sid: str | bytes) -> tuple[str, str]:
    """Inverse of :func:`slice_id`."""
    key, value = json.loads(sid)
    return key, value


def slice_label(key: str, value: str) -> str:
    """A slice as people write it (API ``slice=``, alert check names): ``"<key>:<value>"``.

    Examples
    --------
    >>> slice_label("country", "DE")
    'country:DE'
    """
    return f"{key}:{value}"


def parse_slice_label(text: str, keys: Sequence[str]) -> tuple[str, str] | None:
    """Split ``"<key>:<value>"`` at the configured key it starts with (the longest), so
    keys and values may themselves contain ``:``; None when no key matches or the
    value is empty.

    Examples
    --------
    >>> parse_slice_label("country:DE", ["country"]), parse_slice_label("a:b:c", ["a", "a:b"])
    (('country', 'DE'), ('a:b', 'c'))
    >>> parse_slice_label("country", ["country"]) is None
    True
    """
    for key in sorted(keys, key=len, reverse=True):
        if text.startswith(key + ":") and len(text) > len(key) + 1:
            return key, text[len(key) + 1:]
    return None


def slice_value(value: Any) -> str | None:
    """A feature value as a slice value: strings as they are, booleans ``"true"`` /
    ``"false"``, integers in decimal; None (no slice) for anything else -- a
    continuous value is not a segment.

    Examples
    --------
    >>> slice_value("DE"), slice_value(False), slice_value(3), slice_value(0.5)
    ('DE', 'false', '3', None)
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int):
        return str(value) if value != "" else None
    return None
