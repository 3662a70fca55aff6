"""The alert store's Lua scripts (:class:`service.alerting.store.AlertStore`): one atomic
step each for a window's outcomes, a series' settling, an alert's upsert, an incident's
join and an alert's open state."""

from __future__ import annotations

# Record one window's outcomes (ARGV: window start, member, then field/outcome-JSON
# pairs) and take the window off the model's pending set. An outcome at or before
# the series' settled start, or of a member already recorded, is ignored. Returns
# {seq, start of the earliest window still pending (or false), series..., abandoned}:
# windows before that start are *released* (every earlier window of the model is
# applied), so folding them gives the same episodes whatever the order of
# evaluation. A window still pending a day before the one recorded (its event was
# lost) is abandoned, so it cannot hold the model back forever.
PENDING_HORIZON_SECONDS = 86_400

RECORD = """
for i = 3, #ARGV, 2 do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  local s = raw and cjson.decode(raw) or {settled = -1, o = {}}
  local known = tonumber(ARGV[1]) <= s.settled
  for _, o in ipairs(s.o) do if o[2] == ARGV[2] then known = true end end
  if not known then
    table.insert(s.o, cjson.decode(ARGV[i + 1]))
    redis.call('HSET', KEYS[1], ARGV[i], cjson.encode(s))
  end
end
redis.call('ZREM', KEYS[2], ARGV[2])
local abandoned = redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf',
                             '(' .. (tonumber(ARGV[1]) - PENDING_HORIZON))
local seq = redis.call('HINCRBY', KEYS[3], 'seq', 1)
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
return {seq, first[2] or false, redis.call('HGETALL', KEYS[1]), abandoned}
"""

# Forget a series' outcomes at or before ARGV[2] (they are folded into alerts).
SETTLE = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local s = cjson.decode(raw)
local upto = tonumber(ARGV[2])
if upto == -2 then
  for _, o in ipairs(s.o) do if o[1] > upto then upto = o[1] end end
end
if upto <= s.settled then return 0 end
local kept = {}
for _, o in ipairs(s.o) do if o[1] > upto then table.insert(kept, o) end end
s.o = kept
s.settled = upto
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(s))
return 1
"""

# Compare-and-set an alert on its seq (ARGV: seq, created_at, state, JSON body); the
# first write's created_at and the incident stay. Returns 1 when created, 2 when
# updated, 3 when updated with a new state, 0 when the stored alert is newer.
UPSERT = """
local old = redis.call('HMGET', KEYS[1], 'seq', 'state')
if old[1] then
  if tonumber(old[1]) > tonumber(ARGV[1]) then return 0 end
  redis.call('HSET', KEYS[1], 'seq', ARGV[1], 'state', ARGV[3], 'body', ARGV[4])
  if old[2] ~= ARGV[3] then return 3 end
  return 2
end
redis.call('HSET', KEYS[1], 'seq', ARGV[1], 'created_at', ARGV[2], 'state', ARGV[3], 'body', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[5])
return 1
"""

# Join the incident of a group key whose event-time span meets the alert's, or open one;
# an alert already in an incident (ARGV[9]) only widens that incident's span. KEYS: the
# group's spans HASH (incident id -> "lo:hi", event-time seconds), the incidents ZSET.
# ARGV: alert id, new incident id, incident JSON, created_at, alert span lo and hi, gap
# (spans closer than it meet), forget-before (spans ending earlier are dropped), the
# alert's incident id or "", TTL of the spans HASH. Returns the incident id.
JOIN = """
local lo, hi, gap = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local best, blo, bhi = nil, lo, hi
local spans = redis.call('HGETALL', KEYS[1])
for i = 1, #spans, 2 do
  local a, b = string.match(spans[i + 1], '^(-?[%d.]+):(-?[%d.]+)$')
  a, b = tonumber(a), tonumber(b)
  if ARGV[9] ~= '' then
    if spans[i] == ARGV[9] then best, blo, bhi = spans[i], a, b end
  elseif b < tonumber(ARGV[8]) then
    redis.call('HDEL', KEYS[1], spans[i])
  elseif lo < b + gap and hi > a - gap
         and (best == nil or a < blo or (a == blo and spans[i] < best)) then
    best, blo, bhi = spans[i], a, b
  end
end
if best == nil then
  best = ARGV[9] ~= '' and ARGV[9] or ARGV[2]
  if ARGV[9] == '' then
    redis.call('SET', ARGV[11] .. best, ARGV[3], 'NX')
    redis.call('ZADD', KEYS[2], 'NX', ARGV[4], best)
  end
end
redis.call('HSET', KEYS[1], best, string.format('%d:%d', math.min(blo, lo), math.max(bhi, hi)))
redis.call('EXPIRE', KEYS[1], ARGV[10])
redis.call('SADD', ARGV[11] .. best .. ':alerts', ARGV[1])
return best
"""


# Open or close an alert in {fw}:open and {fw}:open:alerts at once. An alert a user resolved
# (its hash has resolved_by) is never opened again, whoever writes it later. KEYS: {fw}:open,
# {fw}:open:alerts, the alert's hash. ARGV: id, '1' to open, OpenAlert JSON, then for a
# close: field/value pairs of the user's resolution, set in the same step.
SET_OPEN = """
if ARGV[2] == '1' and redis.call('HEXISTS', KEYS[3], 'resolved_by') == 0 then
  redis.call('SADD', KEYS[1], ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
  return 1
end
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]) end
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 0
"""
