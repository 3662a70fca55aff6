"""Early looks: what an open window gathered since its previous look, published by the
aggregator on the window-event stream for the detector's data-quality tests mid-window
(docs/alerting.md, "Looks inside an open window").

A look is advisory. It is not part of the checkpoint protocol: a look lost in a crash
leaves the window's close to page, and a look published again after a restart tests
records that were tested before (the alert it may raise has the id the window's own
episode would have, so it is never raised twice).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from service.profiles.keys import window_member
from sketches.feature import QualityCounts
from sketches.profile import WindowProfile

if TYPE_CHECKING:
    from service.profiles.partition import WindowKey

#: Records a look needs since the previous one (enough for the rate tests' 30 and a break's
#: p-value far below any gate's level: 48 nulls of 50 against a 1 % baseline under a 0.1
#: floor is p ~ 10^-40)...
LOOK_RECORDS = 50
#: ...and at least this share of the window's records before it: a window of n records has
#: 4 looks to 200 records, then log(n / 200) / log(1.25) more (~32 for 100,000 records).
LOOK_GROWTH = 0.25
#: A message is cut at a look only when its records up to the look are earlier than the
#: rest by this share of the window or more (service.profiles.aggregator._add_looking).
LOOK_CUT = 32
#: A window's looks are kept this long past its length, for its close (then they expire)...
LOOKS_KEPT_SECONDS = 2 * 86_400
#: ...at most this many, the first (a window has ~32; a replay publishes its looks again).
MAX_WINDOW_LOOKS = 64
#: Counts a look may carry, each in [0, this] (what any window can hold, with room).
MAX_COUNT = 10**12


@dataclass(frozen=True)
class WindowLook:
    """One look at an open window.

    Attributes
    ----------
    model_id, member : str
        The window (its member in the model's index, ``length:start:version``).
    records : int
        Records since the previous look of the window (in this process).
    at : float
        Event time of the latest of them, Unix seconds, at most the window's end: when
        the evidence was there.
    counts : dict of str to QualityCounts
        Per feature of the window, its values among those records.
    prior_end : int
        End of the latest window of the model before this one that the partition holds or
        closed (0: none): the detector applies the look once the alert policy has applied
        every window of the model up to there (its fold is then complete).
    """

    model_id: str
    member: str
    records: int
    at: float
    counts: dict[str, QualityCounts] = field(default_factory=dict)
    prior_end: int = 0

    def to_fields(self) -> dict[str, str]:
        """The stream entry: ``model``, ``member`` (as a window-closed event's) and ``look``."""
        body = {"records": self.records, "at": self.at, "prior": self.prior_end,
                "q": {n: [c.total, c.nulls, c.nonfinite] for n, c in self.counts.items()}}
        return {"model": self.model_id, "member": self.member, "look": json.dumps(body)}

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> WindowLook:
        """Inverse of :meth:`to_fields`.

        Raises
        ------
        ValueError
            Naming what is wrong: a missing field, counts that are not integers in
            [0, MAX_COUNT] with nulls and non-finite values at most the total, a
            non-finite time, no records.

        Examples
        --------
        >>> look = WindowLook("m", "3600:0:1", 100, 1800.0, {"x": QualityCounts(100, 3, 0)}, -3600)
        >>> WindowLook.from_fields(look.to_fields()) == look
        True
        >>> WindowLook.from_fields({**look.to_fields(), "look": '{"records": 0, "at": 1, "q": {}}'})
        Traceback (most recent call last):
        ...
        ValueError: look.records: 0 is not an integer in [1, 1000000000000]
        >>> WindowLook.from_fields({**look.to_fields(), "look": '{"records": 1, "at": 1, "q": {}}'}).prior_end
        0
        """
        try:
            body: Any = json.loads(fields["look"])
            model_id, member = fields["model"], fields["member"]
        except (KeyError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise ValueError(f"look: not a look event ({type(exc).__name__})") from None
        if not isinstance(body, dict) or not isinstance(body.get("q"), dict):
            raise ValueError("look: not an object with 'records', 'at' and 'q'")
        records = _count("look.records", body.get("records"), lo=1)
        at = body.get("at")
        if (not isinstance(at, (int, float)) or isinstance(at, bool) or abs(at) > MAX_COUNT
                or not math.isfinite(at)):
            raise ValueError(f"look.at: {str(at)[:40]} is not a finite time")
        prior = body.get("prior", 0)
        if not isinstance(prior, int) or isinstance(prior, bool) or abs(prior) > MAX_COUNT:
            raise ValueError(f"look.prior: {str(prior)[:40]} is not a time in whole seconds")
        counts = {}
        for name, triple in body["q"].items():
            if not isinstance(triple, list) or len(triple) != 3:
                raise ValueError(f"look.q.{name}: not [total, nulls, nonfinite]")
            total, nulls, nonfinite = (_count(f"look.q.{name}", v) for v in triple)
            if nulls > total or nonfinite > total:
                raise ValueError(f"look.q.{name}: more nulls or non-finite values than values")
            counts[name] = QualityCounts(total, nulls, nonfinite)
        return cls(model_id, member, records, float(at), counts, prior)


def _count(name: str, v: Any, lo: int = 0) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= MAX_COUNT:
        raise ValueError(f"{name}: {str(v)[:40]} is not an integer in [{lo}, {MAX_COUNT}]")
    return v


@dataclass
class _Mark:
    records: int = 0
    counts: dict[str, QualityCounts] = field(default_factory=dict)


class LookTracker:
    """Per open window of a partition, the records and counts at its previous look.

    Kept in memory only: a window restored from a checkpoint is looked at afresh, from
    its first record (see the module's note).
    """

    def __init__(self) -> None:
        self._marks: dict[WindowKey, _Mark] = {}

    def needed(self, key: WindowKey, records: int) -> int:
        """Records the window (holding ``records``) needs before its next look (>= 1)."""
        mark = self._marks.get(key)
        before = 0 if mark is None else mark.records
        return max(before + max(LOOK_RECORDS, int(before * LOOK_GROWTH)) - records, 1)

    def take(self, key: WindowKey, profile: WindowProfile, latest: float, prior_end: int) -> WindowLook:
        """The look at ``profile`` (the open window ``key``) now; ``latest``: the event time
        of its latest record; ``prior_end``: see :attr:`WindowLook.prior_end`."""
        mark = self._marks.get(key) or _Mark()
        counts = {n: f.quality_counts() for n, f in profile.features.items()}
        absent = QualityCounts(mark.records, mark.records, 0)  # a feature first seen since
        self._marks[key] = _Mark(profile.count, counts)
        m, version, length, start = key
        return WindowLook(m, window_member(length, start, version), profile.count - mark.records,
                          min(latest, float(start + length)),
                          {n: c.minus(mark.counts.get(n, absent)) for n, c in counts.items()}, prior_end)

    def forget(self, key: WindowKey) -> None:
        """The window closed."""
        self._marks.pop(key, None)
