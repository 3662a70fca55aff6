"""The detector's test results per window, in Redis (read by the drift API and the dashboard)."""

from __future__ import annotations

import json
from typing import Any

import orjson

from service.profiles.fleet import LatestWindow, heat_cells, window_status
from service.profiles.keys import (
    FLEET_LATEST,
    counts_key,
    heat_key,
    parse_member,
    results_key,
    window_index_key,
)
from service.runtime.redis_client import Client

#: Record counts cached per model (``fw:{m}:counts``) before the oldest are dropped, and
#: how many windows' counts are kept then (the sparklines show ``ui_recent_windows``).
COUNTS_TRIM_AT, COUNTS_KEPT = 2_048, 1_024

# Store one window's results and its heatmap cells (same expiry), in the model's hash
# slot. With the window's record count (ARGV[5], '' when unknown) it is cached in the
# model's counts; past COUNTS_TRIM_AT cached counts, those of all but the index's newest
# COUNTS_KEPT windows are dropped. KEYS: results, heat, counts, index. ARGV: results JSON,
# ttl, heat JSON, member, count.
_PUT_RESULTS = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('SET', KEYS[2], ARGV[3], 'EX', ARGV[2])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[4], ARGV[5])
  if redis.call('HLEN', KEYS[3]) > COUNTS_TRIM_AT then
    local keep = {}
    for _, m in ipairs(redis.call('ZRANGE', KEYS[4], -COUNTS_KEPT, -1)) do keep[m] = true end
    for _, m in ipairs(redis.call('HKEYS', KEYS[3])) do
      if not keep[m] then redis.call('HDEL', KEYS[3], m) end
    end
  end
end
return 1
"""

# Then (the fleet's hash slot) make the window the model's latest in the fleet index unless
# a later one (by start, then member) is there already: windows evaluated out of order
# (replicas, a redelivered event) never move it back. KEYS: fleet latest. ARGV: model,
# start, member, latest JSON.
_PUT_LATEST = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local start = tonumber(ARGV[2])
if raw then
  local old = cjson.decode(raw)
  if old.start > start or (old.start == start and old.member > ARGV[3]) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
return 1
"""


class ResultStore:
    """The results half of :class:`~service.profiles.store.Store`."""

    r: Client
    _put_results: Any
    _put_latest: Any

    # -- detector results ---------------------------------------------------------------
    async def put_results(self, model_id: str, member: str, results: list[dict[str, Any]],
                          retention_seconds: int, count: int | None = None) -> None:
        """Store the test results of one window (served by the drift API) with its heatmap
        cells (one script in the model's hash slot), then make it the model's latest window in
        the fleet index unless a later window is there (one script in the fleet's slot): in
        that order, so the index never names results not stored; a crash in between leaves
        the index at the model's previous window until its next results.
        ``count``: the window's record count, cached for the dashboard's volume charts
        (:meth:`window_counts_many`), so they need not read the profile."""
        start = parse_member(member)[1]
        latest = LatestWindow(member, start, window_status(results))
        await self._put_results(
            keys=[results_key(model_id, member), heat_key(model_id, member), counts_key(model_id),
                  window_index_key(model_id)],
            args=[json.dumps(results, default=str), retention_seconds, orjson.dumps(heat_cells(results)),
                  member, "" if count is None else count])
        await self._put_latest(keys=[FLEET_LATEST], args=[model_id, start, member, latest.to_json()])

    async def results(self, model_id: str, member: str) -> list[dict[str, Any]] | None:
        raw = await self.r.get(results_key(model_id, member))
        return None if raw is None else json.loads(raw)

    async def results_many(self, model_id: str, members: list[str]) -> list[list[dict[str, Any]] | None]:
        """:meth:`results` of many windows of one model in one round trip (MGET)."""
        if not members:
            return []
        raws = await self.r.mget([results_key(model_id, member) for member in members])
        return [None if raw is None else json.loads(raw) for raw in raws]

    async def results_each(self, pairs: list[tuple[str, str]]) -> list[list[dict[str, Any]] | None]:
        """:meth:`results` of (model, member) pairs of any models, in one round trip (decoded
        with orjson: the dashboard reads many windows' results per page)."""
        async with self.r.pipeline(transaction=False) as p:
            for m, member in pairs:
                p.get(results_key(m, member))
            raws = await p.execute()
        return [None if raw is None else orjson.loads(raw) for raw in raws]
