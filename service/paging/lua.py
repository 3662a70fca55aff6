"""The notifier's Lua scripts on notification groups (one atomic step each)."""

from __future__ import annotations

# Touch a group: create it (first_seen = now, nothing sent), bump its version, and
# ask for a flush no later than: group_wait after its first alert while nothing was
# sent; now for an acknowledgement; else group_interval after the last notification.
# KEYS: group hash, schedule zset. ARGV: now, group_wait, group_interval, member, kind.
TOUCH_GROUP = """
redis.call('HSETNX', KEYS[1], 'first_seen', ARGV[1])
redis.call('HSETNX', KEYS[1], 'sent', 'none')
redis.call('HINCRBY', KEYS[1], 'v', 1)
local st = redis.call('HMGET', KEYS[1], 'first_seen', 'sent', 'last_sent')
local now = tonumber(ARGV[1])
local at
if st[2] == 'none' then
  at = tonumber(st[1]) + tonumber(ARGV[2])
elseif ARGV[5] == 'acknowledged' then
  at = now
else
  at = math.max(now, (tonumber(st[3]) or now) + tonumber(ARGV[3]))
end
redis.call('ZADD', KEYS[2], 'LT', at, ARGV[4])
return 1
"""

# Forget a schedule entry whose group state is gone. KEYS: group hash, schedule zset.
FORGET_GROUP = """
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('ZREM', KEYS[2], ARGV[1]) end
return 1
"""
