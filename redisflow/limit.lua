-- One decision of a cluster-wide limit: at most ARGV[1] permits in any
-- interval of ARGV[3] buckets of ARGV[2] microseconds, on the Redis server's
-- clock.
--
-- KEYS[1]  the limit's hash: one field per bucket in the window (its index)
--          holding the permits granted in it; field "o", the newest bucket
--          of the window, and "s", the permits in the window's buckets
-- ARGV[1]  limit    the most permits in any interval
-- ARGV[2]  width    a bucket's width, in microseconds
-- ARGV[3]  k        buckets per interval
-- ARGV[4]  n        permits the caller needs: all or none
-- ARGV[5]  extra    permits the caller would take on top, as a lease, if free
-- ARGV[6]  rbucket  the bucket of an earlier lease whose unused permits
-- ARGV[7]  rcount   are given back (rcount 0: none)
--
-- The window is the bucket the time falls in and the k buckets before it. A
-- grant is allowed only if the window holds, with it, no more than the
-- limit: an interval of k buckets touches at most k+1 of them, so no interval
-- holds more than the limit. The window's sum is kept with it, so that a
-- decision reads two fields, not k+1; the buckets that leave the window as it
-- moves are subtracted and deleted. A time earlier than the window (the
-- server's clock stepped back) counts in its newest bucket; if it stepped back
-- more than an interval, the buckets ahead are forgotten instead.
--
-- Returns {allowed, granted, retry, bucket, now}: allowed is 1 or 0; granted
-- the permits counted (n plus the lease); retry, for a block, the
-- microseconds until n would fit if nothing else were granted; bucket the
-- bucket counted in; now the server's time in microseconds.
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, width, k = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local n, extra = tonumber(ARGV[4]), tonumber(ARGV[5])
local rbucket, rcount = tonumber(ARGV[6]), tonumber(ARGV[7])
local function field(b) return string.format('%.0f', b) end
-- A window whose newest bucket is b counts until bucket b+k+1 opens; then
-- every field is out of it and the key can go. Whenever "o" is set, so is
-- the key's ttl, to this: at least 1 ms, never 0.
local function ttl(b) return math.max(math.ceil(((b + k + 1) * width - now) / 1000), 1) end

local open = math.floor(now / width)
local state = redis.call('HMGET', key, 'o', 's')
local last, sum = tonumber(state[1]), tonumber(state[2]) or 0
local changed = false
if last then
  if last >= open and last - open <= k then
    open = last
  elseif last > open or open - last > k then
    -- Stepped back more than an interval, or every bucket has left.
    redis.call('DEL', key)
    last, sum = nil, 0
  else
    -- Buckets last-k .. open-k-1 leave the window.
    local gone = {}
    for b = last - k, open - k - 1 do gone[#gone + 1] = field(b) end
    local counts = redis.call('HMGET', key, unpack(gone))
    for i = 1, #counts do sum = sum - (tonumber(counts[i]) or 0) end
    redis.call('HDEL', key, unpack(gone))
    changed = true
  end
end
local oldest = open - k

if last and rcount > 0 and rbucket >= oldest and rbucket <= open then
  local back = math.min(rcount, tonumber(redis.call('HGET', key, field(rbucket))) or 0)
  if back > 0 then
    redis.call('HINCRBY', key, field(rbucket), -back)
    sum = sum - back
    changed = true
  end
end

if sum + n > limit then
  if changed then
    redis.call('HSET', key, 'o', field(open), 's', field(sum))
    redis.call('PEXPIRE', key, ttl(open))
  end
  -- Buckets leave the window oldest first: bucket b leaves when bucket
  -- b+k+1 opens.
  local need, freed, b = sum + n - limit, 0, oldest
  if open > oldest then
    local fields = {}
    for i = oldest, open - 1 do fields[#fields + 1] = field(i) end
    local counts = redis.call('HMGET', key, unpack(fields))
    for i = 1, #counts do
      freed = freed + (tonumber(counts[i]) or 0)
      if freed >= need then break end
      b = b + 1
    end
  end
  return {0, 0, math.max((b + k + 1) * width - now, 1), open, now}
end

local granted = n + math.max(math.min(extra, limit - sum - n), 0)
redis.call('HINCRBY', key, field(open), granted)
if open == last and not changed then
  -- The window has not moved: its ttl stands.
  redis.call('HINCRBY', key, 's', granted)
else
  redis.call('HSET', key, 'o', field(open), 's', field(sum + granted))
  redis.call('PEXPIRE', key, ttl(open))
end
return {1, granted, 0, open, now}
