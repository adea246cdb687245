-- One decision of a cluster-wide limit: at most ARGV[1] permits in any
-- interval of ARGV[3] buckets of ARGV[2] microseconds, on the Redis server's
-- clock.
--
-- KEYS[1]  the limit's hash: one field per bucket (its index) holding the
--          permits granted in it, and field "o", the newest bucket counted in
-- ARGV[1]  limit    the most permits in any interval
-- ARGV[2]  width    a bucket's width, in microseconds
-- ARGV[3]  k        buckets per interval
-- ARGV[4]  n        permits the caller needs: all or none
-- ARGV[5]  extra    permits the caller would take on top, as a lease, if free
-- ARGV[6]  rbucket  the bucket of an earlier lease whose unused permits
-- ARGV[7]  rcount   are given back (rcount 0: none)
--
-- A grant is admitted only if the bucket it falls in and the k buckets before
-- it hold, with it, no more than the limit: an interval of k buckets touches
-- at most k+1 of them, so no interval holds more than the limit. A time
-- earlier than the newest bucket counted in (the server's clock stepped
-- back) counts in that bucket; if it stepped back more than an interval, the
-- buckets ahead are forgotten instead.
--
-- Returns {allowed, granted, retry, bucket, now}: allowed is 1 or 0; granted
-- the permits counted (n plus the lease); retry, for a refusal, the
-- microseconds until n would fit if nothing else were granted; bucket the
-- bucket counted in; now the server's time in microseconds.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, width, k = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local n, extra = tonumber(ARGV[4]), tonumber(ARGV[5])
local rbucket, rcount = tonumber(ARGV[6]), tonumber(ARGV[7])

local open = math.floor(now / width)
local newest
local counts = {}
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h, 2 do
  if h[i] == 'o' then
    newest = tonumber(h[i + 1])
  else
    counts[tonumber(h[i])] = tonumber(h[i + 1])
  end
end
-- The clock stepped back: count in the newest bucket, unless it is more than
-- an interval ahead; then forget the buckets ahead, rather than refuse
-- everything until the clock catches up.
if newest and newest > open and newest - open <= k then open = newest end
local oldest = open - k
local function field(b) return string.format('%.0f', b) end

local sum = 0
for b, c in pairs(counts) do
  if b < oldest or b > open then
    redis.call('HDEL', KEYS[1], field(b))
    counts[b] = nil
  else
    sum = sum + c
  end
end
if rcount > 0 and rbucket >= oldest and counts[rbucket] then
  local back = math.min(rcount, counts[rbucket])
  redis.call('HINCRBY', KEYS[1], field(rbucket), -back)
  counts[rbucket] = counts[rbucket] - back
  sum = sum - back
end

if sum + n > limit then
  -- Buckets leave the window oldest first: bucket b leaves when bucket
  -- b+k+1 opens.
  local need, freed, b = sum + n - limit, 0, oldest
  while b < open do
    freed = freed + (counts[b] or 0)
    if freed >= need then break end
    b = b + 1
  end
  return {0, 0, math.max((b + k + 1) * width - now, 1), open, now}
end

local granted = n + math.max(math.min(extra, limit - sum - n), 0)
redis.call('HINCRBY', KEYS[1], field(open), granted)
redis.call('HSET', KEYS[1], 'o', field(open))
-- The newest bucket counts until bucket open+k+1 opens; then every field is
-- out of the window and the key can go. At least 1 ms, never 0.
redis.call('PEXPIRE', KEYS[1], math.max(math.ceil(((open + k + 1) * width - now) / 1000), 1))
return {1, granted, 0, open, now}
