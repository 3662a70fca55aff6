"""The fleet's traffic per window: the volume test's control (:mod:`detectors.volume_fleet`).

The aggregators record each closed window's record count under its window length and
start, with the window-closed event (:mod:`service.profiles.checkpoints`, step 3: one
``HSET`` per window, so a repeated step counts it once), and each model's latest closed
window per length. A window of the fleet is *settled* when every model that closed the
window before it has closed it too; its control is then computed once and kept, so every
model's volume test of that window reads the same one.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict

from detectors.volume_fleet import FleetControl
from service.profiles.checkpoints import traffic_ttl
from service.profiles.keys import control_key, traffic_key, traffic_through_key
from service.runtime.redis_client import Client

log = logging.getLogger("fleetwatch.detector")


class TrafficStore:
    """The fleet-traffic half of :class:`~service.profiles.store.Store`."""

    r: Client

    async def fleet_unsettled(self, window_seconds: int, start: int) -> int:
        """Models that closed their window of ``window_seconds`` before ``start`` and not yet
        the one at ``start`` (0: the fleet's window at ``start`` is settled)."""
        before = start - window_seconds
        return int(await self.r.zcount(traffic_through_key(window_seconds), before, before))

    async def fleet_control(self, window_seconds: int, start: int, trailing: int, keep: bool) -> FleetControl:
        """The fleet control of the window at ``start`` over it and the ``trailing`` windows
        before it: the one kept, else computed from the traffic hashes (one round trip)
        and kept if ``keep`` (the window is settled; the first one kept wins)."""
        key = control_key(window_seconds, start)
        raw = await self.r.get(key)
        if raw is not None:
            try:
                return FleetControl.from_dict(json.loads(raw))
            except (ValueError, KeyError, TypeError):
                log.warning("fleet control %s does not read back: computed again", key)
        starts = [start - k * window_seconds for k in range(trailing, -1, -1)]
        async with self.r.pipeline(transaction=False) as p:
            for s in starts:
                p.hgetall(traffic_key(window_seconds, s))
            hashes = await p.execute()
        control = FleetControl.of(starts, [_per_model(h) for h in hashes])
        if keep:
            await self.r.set(key, json.dumps(control.to_dict()), nx=not raw, ex=traffic_ttl(window_seconds))
        return control


def _per_model(fields: dict[bytes, bytes]) -> dict[str, int]:
    """Records per model of one traffic hash (its versions summed; a field or count that
    does not read back is left out)."""
    out: dict[str, int] = defaultdict(int)
    for name, count in fields.items():
        try:
            model, _version = json.loads(name)
            out[str(model)] += max(int(count), 0)
        except (ValueError, TypeError):
            continue
    return dict(out)
