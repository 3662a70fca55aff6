"""Slice sub-profiles of one slice key, capped in number: heavy hitters plus "other".

A slice key (e.g. ``"country"``) splits a window's records by slice value. Each
value gets its own sub-profile until ``max_values`` values have one; records of
any further value go to the sub-profile ``OTHER``, so a key with unbounded
cardinality costs bounded memory. Within a batch, new values are admitted
heaviest first. Merging two slice sets keeps the ``max_values`` values with the
most records and folds the rest into ``OTHER``, so after a merge the kept
values are heavy hitters of the merged traffic, as far as they had their own
sub-profiles in some part. ``OTHER`` only ever holds records the cap turned
away, so its record count, :attr:`SliceSet.capped_records`, says how much the
cap bit. Without the cap biting, merging partial slice sets in any order gives
the one-pass result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

OTHER = "__other__"
MAX_SLICE_VALUES = 16


class _SubProfile(Protocol):
    count: int

    def merge(self, other: Any) -> Any: ...


P = TypeVar("P", bound=_SubProfile)


class SliceSet(Generic[P]):
    """Sub-profiles of one slice key: one per slice value, at most ``max_values``, plus OTHER.

    Parameters
    ----------
    max_values : int
        Slice values that get their own sub-profile.
    new : callable
        Makes an empty sub-profile.

    Raises
    ------
    ValueError
        If ``max_values`` < 1.

    Examples
    --------
    >>> class Counted:
    ...     def __init__(self): self.count = 0
    ...     def merge(self, other): self.count += other.count
    >>> s = SliceSet(2, Counted)
    >>> for p, rows in s.route(["DE", "FR", "DE", "US", None]):
    ...     p.count += rows.size
    >>> {k: p.count for k, p in s.profiles.items()}, s.capped_records
    ({'DE': 2, 'FR': 1, '__other__': 1}, 1)
    """

    __slots__ = ("max_values", "profiles", "_new")

    def __init__(self, max_values: int, new: Callable[[], P]) -> None:
        if max_values < 1:
            raise ValueError("max_values must be >= 1")
        self.max_values = max_values
        self.profiles: dict[str, P] = {}
        self._new = new

    def _get(self, name: str) -> P:
        p = self.profiles.get(name)
        if p is None:
            p = self.profiles[name] = self._new()
        return p

    @property
    def capped_records(self) -> int:
        """Records that fell in ``OTHER`` because the cap was reached."""
        other = self.profiles.get(OTHER)
        return 0 if other is None else other.count

    def route(self, values: Sequence[str | None]) -> list[tuple[P, np.ndarray]]:
        """Assign rows to sub-profiles, creating them as the cap allows.

        Parameters
        ----------
        values : sequence of str or None
            The slice value of each row; rows with None belong to no sub-profile.

        Returns
        -------
        list of (sub-profile, row indices)
        """
        groups: dict[str, list[int]] = {}
        for i, v in enumerate(values):
            if v is not None:
                rows = groups.get(v)
                if rows is None:
                    groups[v] = [i]
                else:
                    rows.append(i)
        out: list[tuple[P, np.ndarray]] = []
        capped: list[int] = []
        for v, rows in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            named = len(self.profiles) - (OTHER in self.profiles)
            if v in self.profiles or named < self.max_values:
                out.append((self._get(v), np.array(rows)))
            else:
                capped += rows
        if capped:
            out.append((self._get(OTHER), np.array(sorted(capped))))
        return out

    def merge(self, other: SliceSet[P]) -> None:
        """Merge ``other`` into this set (in place), then enforce the cap; ``other`` is unchanged."""
        for name, p in other.profiles.items():
            self._get(name).merge(p)
        named = sorted((k for k in self.profiles if k != OTHER),
                       key=lambda k: (-self.profiles[k].count, k))
        for name in named[self.max_values:]:
            self._get(OTHER).merge(self.profiles.pop(name))

    def to_dict(self, dump: Callable[[P], Any]) -> dict[str, Any]:
        """Plain-data form, each sub-profile written by ``dump``."""
        return {"max": self.max_values, "profiles": {k: dump(p) for k, p in self.profiles.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any], new: Callable[[], P], load: Callable[[Any], P]) -> SliceSet[P]:
        """Inverse of :meth:`to_dict`."""
        s = cls(d["max"], new)
        s.profiles = {k: load(v) for k, v in d["profiles"].items()}
        return s
