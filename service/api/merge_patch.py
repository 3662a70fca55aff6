"""JSON Merge Patch (RFC 7396): change some fields of a JSON document without resending it."""

from __future__ import annotations

from typing import Any


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch to a JSON value.

    Parameters
    ----------
    target : JSON value
        The document to change (not modified).
    patch : JSON value
        An object: each member replaces the target's member of that name, ``null``
        removes it, and an object is merged into the target's member recursively. Any
        other value replaces the whole target.

    Returns
    -------
    JSON value
        The patched document.

    Notes
    -----
    The ``MergePatch(Target, Patch)`` function of RFC 7396, section 2, as written there.
    A list is replaced, never merged; removing a member of a configuration puts it back
    to its default.

    References
    ----------
    P. Hoffman, J. Snell, "JSON Merge Patch", RFC 7396, IETF, 2014.

    Examples
    --------
    >>> merge_patch({"tier": 2, "owner": "a", "routing": {"team": "x", "channel": "y"}},
    ...             {"tier": 1, "owner": None, "routing": {"channel": "z"}})
    {'tier': 1, 'routing': {'team': 'x', 'channel': 'z'}}
    >>> merge_patch({"a": [1, 2]}, {"a": [3]})
    {'a': [3]}
    >>> merge_patch({"a": 1}, [1])
    [1]
    """
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = merge_patch(out.get(name), value)
    return out
