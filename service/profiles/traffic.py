"""The fleet's traffic per window: the volume test's control (:mod:`detectors.volume_fleet`).

The aggregators record each closed window's record count under its window length and
start, with the window-closed event (:mod:`service.profiles.checkpoints`, step 3: one
``HSET`` per window, so a repeated step counts it once), and each model's latest closed
window per length. A window of the fleet is *settled* when every model that closed the
window before it has closed it too; its traffic is then read once and kept in the process
(read again only when more models have closed it), so every model's volume test of that
window reads the same records.
"""

from __future__ import annotations

import json
from collections import OrderedDict, defaultdict

from detectors.volume_fleet import MAX_RECORDS, FleetTraffic
from service.profiles.keys import traffic_key, traffic_through_key
from service.runtime.redis_client import Client

#: Fleet windows whose traffic a process keeps (each the records of every model over a
#: day of windows: a few MB for 10,000 models).
KEPT_WINDOWS = 8


class TrafficStore:
    """The fleet-traffic half of :class:`~service.profiles.store.Store`."""

    r: Client
    #: (length, start, trailing) -> (the window's models when read, their records).
    _traffic: OrderedDict[tuple[int, int, int], tuple[int, FleetTraffic]]

    async def fleet_unsettled(self, window_seconds: int, start: int) -> int:
        """Models that closed their window of ``window_seconds`` before ``start`` and not yet
        the one at ``start`` (0: the fleet's window at ``start`` is settled)."""
        before = start - window_seconds
        return int(await self.r.zcount(traffic_through_key(window_seconds), before, before))

    async def fleet_traffic(self, window_seconds: int, start: int, trailing: int) -> FleetTraffic:
        """The fleet's records in the window at ``start`` and the ``trailing`` windows before
        it: the traffic hashes in one round trip, kept in this process (the last
        :data:`KEPT_WINDOWS`) and read again only once more models have closed the window
        (its hash's length, one command), so every model's window there is judged through
        the same records."""
        key = (window_seconds, start, trailing)
        cache = self._traffic
        closed = int(await self.r.hlen(traffic_key(window_seconds, start)))
        if key in cache and cache[key][0] == closed:
            cache.move_to_end(key)
            return cache[key][1]
        starts = [start - k * window_seconds for k in range(trailing, -1, -1)]
        async with self.r.pipeline(transaction=False) as p:
            for s in starts:
                p.hgetall(traffic_key(window_seconds, s))
            hashes = await p.execute()
        traffic = FleetTraffic.of(starts, [_per_model(h) for h in hashes])
        cache[key] = (len(hashes[-1]), traffic)
        cache.move_to_end(key)
        while len(cache) > KEPT_WINDOWS:
            cache.popitem(last=False)
        return traffic


def _per_model(fields: dict[bytes, bytes]) -> dict[str, int]:
    """Records per model of one traffic hash (its versions summed); a field or count that
    does not read back (not a JSON [model, version], not an integer in [0, MAX_RECORDS]) is
    left out.

    Examples
    --------
    >>> _per_model({b'["a", "1"]': b"5", b'["a", "2"]': b"7", b'["b", "1"]': b"9" * 40, b"x": b"1"})
    {'a': 12}
    """
    out: dict[str, int] = defaultdict(int)
    for name, raw in fields.items():
        try:
            model, _version = json.loads(name)
            count = int(raw)
        except (ValueError, TypeError, RecursionError):
            continue
        if isinstance(model, str) and 0 <= count <= MAX_RECORDS:
            out[model] += count
    return dict(out)
