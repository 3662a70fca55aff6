"""Rollups: closed windows merged into 1-hour and 1-day profiles, kept longer.

A period (an hour, a day) is rolled up once it is complete: every window of
the model that starts before the period's end has been closed and applied by
the alert policy (none is pending), and a later window exists (so no window of
the period can still close). The rollup is the exact merge of the period's
windows per model version (profiles merge exactly, see ``sketches.profile``),
written with its own retention; building it twice writes the same bytes, so
replicas need no coordination. Day rollups merge hour rollups when the model's
windows are shorter than an hour, else its windows. Periods are UTC hours and days,
or, for a model in a time zone (``ModelConfig.window_timezone``), its local days
(23 h and 25 h on DST days, keyed by their true length) and the hours from each local
midnight (:meth:`sketches.window.WindowGrid.rollup`).

Keys: ``fw:{m}:p:{len}:{start}:{version}`` and the index ``fw:{m}:idx:{len}``
(``service.profiles.store``); ``fw:{m}:rolled`` HASH granularity -> start of the next
period to build.
"""

from __future__ import annotations

import logging

from service import metrics
from service.profiles.keys import parse_member, pending_key, profile_key, window_index_key, window_member
from service.profiles.store import Store
from service.settings import Settings
from sketches.profile import WindowProfile
from sketches.window import WindowGrid

log = logging.getLogger("fleetwatch.rollups")

HOUR, DAY = 3_600, 86_400
GRANULARITIES = (HOUR, DAY)
#: Periods built per call at most (a model back from a long gap catches up over calls).
MAX_PERIODS_PER_CALL = 48


def retention(settings: Settings, granularity: int | None) -> int:
    """Seconds a profile of ``granularity`` (None: a closed window) is kept."""
    return {None: settings.retention_window_seconds, HOUR: settings.retention_hourly_seconds,
            DAY: settings.retention_daily_seconds}[granularity]


def sources(window_seconds: int) -> list[tuple[int, int | None]]:
    """(rollup granularity, the granularity it merges: None for closed windows) for a
    model with ``window_seconds`` windows.

    Examples
    --------
    >>> sources(300), sources(3_600), sources(86_400)
    ([(3600, None), (86400, 3600)], [(86400, None)], [])
    """
    out: list[tuple[int, int | None]] = []
    for g in GRANULARITIES:
        if g > window_seconds and g % window_seconds == 0:
            out.append((g, out[-1][0] if out else None))
    return out


class Rollups:
    """Builds a model's complete rollup periods."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store

    async def advance(self, model_id: str, window: int | WindowGrid) -> int:
        """Build the periods completed so far; returns how many rollups were written.

        ``window``: the model's window length (s), or its :class:`WindowGrid` (a grid in a
        time zone rolls up into local days, each of its true length: 23 h on the day clocks
        spring forward, 25 h on the day they fall back; and hours from local midnight)."""
        grid = window if isinstance(window, WindowGrid) else WindowGrid(window)
        r = self.store.r
        latest = await r.zrange(window_index_key(model_id), -1, -1, withscores=True)
        if not latest:
            return 0
        pending = await r.zrange(pending_key(model_id), 0, 0, withscores=True)
        horizon = latest[0][1]  # a later window exists: the periods before it are closed
        if pending:
            horizon = min(horizon, pending[0][1])  # and applied
        written = 0
        for granularity, source in sources(grid.length):
            calendar = grid.rollup(granularity)
            upto = calendar.window_at(horizon)[0]
            raw = await r.hget(f"fw:{{{model_id}}}:rolled", granularity)
            if raw is None:
                first = await r.zrange(window_index_key(model_id, source), 0, 0, withscores=True)
                if not first:
                    continue
                start = calendar.window_at(first[0][1])[0]
            else:
                start = int(raw)
            periods: list[tuple[int, int]] = []
            while start < upto and len(periods) < MAX_PERIODS_PER_CALL:
                periods.append((start, calendar.window_at(start)[1]))
                start += periods[-1][1]
            for period, length in periods:
                written += await self._build(model_id, granularity, source, period, length)
            if periods:
                await r.hset(f"fw:{{{model_id}}}:rolled", granularity, start)
            horizon = min(horizon, upto)
        return written

    async def _build(self, model_id: str, granularity: int, source: int | None, period: int,
                     length: int) -> int:
        members = await self.store.window_members(model_id, period, f"({period + length}", source)
        by_version: dict[str, list[str]] = {}
        for m in members:
            by_version.setdefault(parse_member(m)[2], []).append(m)
        ttl = retention(self.settings, granularity)
        for version, ms in by_version.items():
            parts = await self.store.window_profiles(model_id, sorted(ms, key=lambda m: parse_member(m)[1]),
                                                     source)
            if not parts:
                continue
            rollup = WindowProfile(model_id, period, length, slice_features=parts[0].slice_features,
                                   max_slice_values=parts[0].max_slice_values)
            for p in parts:
                rollup.merge(p)
            member = window_member(length, period, version)
            async with self.store.r.pipeline(transaction=True) as p:
                p.set(profile_key(model_id, member), rollup.to_bytes(), ex=ttl)
                p.zadd(window_index_key(model_id, granularity), {member: period})
                await p.execute()
            metrics.ROLLUPS_WRITTEN.labels(granularity=str(granularity)).inc()
            log.debug("rollup model=%s %s", model_id, member)
        return len(by_version)
