"""The cohort store's Lua scripts (atomic per prediction, label and slice key) and their argument form."""

from __future__ import annotations


def script_arg(v: int | float) -> str:
    """A counter increment for the Lua scripts: floats always carry '.' or 'e' (``HINCRBYFLOAT``),
    integers never (``HINCRBY``).

    Examples
    --------
    >>> script_arg(1), script_arg(1.0), script_arg(-2), script_arg(1e-20)
    ('1', '1.0', '-2', '1e-20')
    """
    return repr(float(v)) if isinstance(v, float) else str(int(v))


_INCR = """
local function incr(key, f, v)
  if string.find(v, '[.eE]') then redis.call('HINCRBYFLOAT', key, f, v)
  else redis.call('HINCRBY', key, f, v) end
end
"""

# Store a prediction once. KEYS: prediction, cohort starts ZSET, the window's slice SET,
# windows with slices not judged yet ZSET, then the cohorts it counts in (whole model
# first). ARGV: ttl, cohort ttl, window start, nfields, field/value pairs, ninc,
# field/increment pairs, then one slice id per slice cohort key.
PREDICT = _INCR + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local i = 5
for _ = 1, tonumber(ARGV[4]) do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]); i = i + 2 end
redis.call('EXPIRE', KEYS[1], ARGV[1])
local ninc = tonumber(ARGV[i]); i = i + 1
for k = 5, #KEYS do
  for j = i, i + 2 * ninc - 1, 2 do incr(KEYS[k], ARGV[j], ARGV[j + 1]) end
  redis.call('EXPIRE', KEYS[k], ARGV[2])
end
i = i + 2 * ninc
if i <= #ARGV then
  for j = i, #ARGV do redis.call('SADD', KEYS[3], ARGV[j]) end
  redis.call('EXPIRE', KEYS[3], ARGV[2])
  redis.call('ZADD', KEYS[4], ARGV[3], ARGV[3])
end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[3])
return 1
"""

# A window whose slice cohorts are all judged leaves the pending set (KEYS: pending
# ZSET, the window's slice SET, its slice evaluations HASH; ARGV: window start).
SETTLE_SLICES = """
if redis.call('SCARD', KEYS[2]) <= redis.call('HLEN', KEYS[3]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
"""

# Join a label (ARGV: label read before, new label, then field/delta pairs applied to
# every cohort KEYS[3..]) if the prediction's label is still the one read (else -2:
# read again). 1 joined, 0 duplicate, -1 no such prediction.
JOIN = _INCR + """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local cur = redis.call('HGET', KEYS[1], 'y') or ''
if cur ~= ARGV[1] then return -2 end
if cur == ARGV[2] then redis.call('HINCRBY', KEYS[2], 'duplicate', 1) return 0 end
redis.call('HSET', KEYS[1], 'y', ARGV[2])
for k = 3, #KEYS do
  for i = 3, #ARGV, 2 do incr(KEYS[k], ARGV[i], ARGV[i + 1]) end
end
if cur == '' then redis.call('HINCRBY', KEYS[2], 'joined', 1)
else redis.call('HINCRBY', KEYS[2], 'relabeled', 1) end
return 1
"""

# Admit slice values of one key (ARGV: cap, stale-before time, then value / last-seen
# pairs, heaviest first): 1 per value admitted (it keeps its own cohort), 0 capped.
ADMIT = """
local cap, stale = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 2 do
  local v, t = ARGV[i], tonumber(ARGV[i + 1])
  local seen = redis.call('ZSCORE', KEYS[1], v)
  if seen then
    if tonumber(seen) < t then redis.call('ZADD', KEYS[1], t, v) end
    out[#out + 1] = 1
  elseif redis.call('ZCARD', KEYS[1]) < cap then
    redis.call('ZADD', KEYS[1], t, v)
    out[#out + 1] = 1
  else
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    if tonumber(oldest[2]) < stale then
      redis.call('ZREM', KEYS[1], oldest[1])
      redis.call('ZADD', KEYS[1], t, v)
      out[#out + 1] = 1
    else
      out[#out + 1] = 0
    end
  end
end
return out
"""
