-- Gives back permits that keyed.lua granted, for a key set of a Redis
-- Cluster whose keys lie in several slots: counted slot by slot, and
-- refused in a later slot, the request must be counted nowhere. It never
-- lets a window hold less than it was granted by others.
--
-- KEYS[j]       window j's state, as keyed.lua writes it
-- ARGV[4j-3]    n      the permits granted to window j
-- ARGV[4j-2]    at     when they were granted: keyed.lua's now, in µs
-- ARGV[4j-1]    width  window j's bucket width, in microseconds
-- ARGV[4j]      k      window j's buckets per interval
--
-- keyed.lua added n to cum(g), g the bucket at counted in (its bucket,
-- floor(at / width), or the newest counted in, if the clock had stepped
-- back), and so to every cum after it. Subtracting n from the cum of every
-- bucket from floor(at / width) on takes n out of every window holding g.
-- A window whose oldest bucket is that far on or later loses n at both
-- ends, and holds what it held: a give-back at most withholds, never
-- grants. The places keep their ttl (SETRANGE), and a string of another
-- length is left alone. Returns nothing.
local tonumber, sunpack, spack, format = tonumber, struct.unpack, struct.pack, string.format
for j = 1, #KEYS do
  local a = 4 * j
  local n, at, width, k = tonumber(ARGV[a - 3]), tonumber(ARGV[a - 2]), tonumber(ARGV[a - 1]), tonumber(ARGV[a])
  local size = k + 2
  local v = redis.call('GET', KEYS[j])
  if v and #v == 8 + 8 * size then
    local last = sunpack('<i8', v)
    local from = math.max(math.floor(at / width), last - k - 1)
    for b = from, last do
      local off = 8 + 8 * (b % size)
      redis.call('SETRANGE', KEYS[j], format('%d', off), spack('<i8', sunpack('<i8', v, off + 1) - n))
    end
  end
end
return 0
