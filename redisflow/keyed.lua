-- One decision of cluster-wide per-key limits: permits under several
-- windows at once, all or none, on the Redis server's clock. A key's
-- windows (5 a second and 100 a minute) take the same n each; the windows
-- of several keys, decided together, may each take their own. No two KEYS
-- are the same string.
--
-- KEYS[j]       window j's state for its key, a string (absent: empty)
-- ARGV[4j-3]    n      permits window j needs, at least 1
-- ARGV[4j-2]    limit  window j's limit for its key
-- ARGV[4j-1]    width  window j's bucket width, in microseconds
-- ARGV[4j]      k      window j's buckets per interval
--
-- As in limit.lua, a window is the bucket the time falls in and the k
-- buckets before it, and a grant is allowed only if every window holds,
-- with it, no more than its limit: an interval of k buckets touches at most
-- k+1 of them, so no interval of a window's length holds more than its limit.
--
-- The state is k+3 little-endian 64-bit integers: o, the newest bucket
-- counted in, then a ring of k+2 cumulative counts, bucket b's at place
-- b % (k+2): what the key was granted in every bucket up to b since the
-- state began. The window o-k .. o holds cum(o) - cum(o-k-1), two reads
-- whatever k is; a grant in bucket o adds to cum(o) alone, 8 bytes written
-- in place (SETRANGE keeps the key's ttl). When the window moves on, the
-- buckets that enter, o+1 .. open, take the places of those that leave,
-- holding cum(o) (nothing was granted in them yet): a rewrite of those
-- places, and of o, with a new ttl. The key expires when bucket o+k+1
-- opens, when nothing in it counts. Counts are exact in a double below
-- 2^53: past 2^52 the ring is rebased (cum(o-k-1) subtracted everywhere).
--
-- A value of any other length (another program's, under the prefix) is
-- taken for an empty window, and replaced. A time earlier than the window
-- (the server's clock stepped back) counts in its newest bucket; if it
-- stepped back more than an interval, the window is forgotten.
--
-- Windows are counted in order, each as soon as it allows its n. If one
-- refuses its n, those counted before it get back what they held: their
-- strings, byte for byte, with the ttls they had, or none where nothing in
-- a string counted any more. The script is atomic: no one sees them in
-- between.
--
-- Returns now, the server's time in microseconds, when every n is granted;
-- else {window, retry, now}: of the windows that refuse their n, the one
-- (0-based) that frees last, first in order on a tie, and retry, the
-- microseconds until its n fits it if nothing else were granted, at least
-- 1. A lone integer, not an array, costs Redis less to return.
--
-- With one more argument, the string 'rooms', it returns {window, retry,
-- now, room...}, window -1 and retry 0 when every n is granted, and after
-- them each window's room before this call: its limit less what it held
-- (negative when it holds more, a limit lowered). A key set's caller
-- answers every key's room from this one call.
--
-- Redis 5 and later replicate a script by its effects, as one that reads
-- TIME must be replicated; this script does not ask for it (limit.lua does,
-- for older servers), which costs every call. It reads and writes its
-- integers with the struct library that Redis's Lua has had since 2.6.
local tonumber, sunpack, spack, format = tonumber, struct.unpack, struct.pack, string.format
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local vals
if #KEYS == 1 then vals = { redis.call('GET', KEYS[1]) } else vals = redis.call('MGET', unpack(KEYS)) end
local refused, retry, counted = -1, 0, #KEYS
local rooms
if ARGV[4 * #KEYS + 1] == 'rooms' then rooms = {} end
for j = 1, #KEYS do
  local key, v, a = KEYS[j], vals[j], 4 * j
  local n, limit, width, k = tonumber(ARGV[a - 3]), tonumber(ARGV[a - 2]), tonumber(ARGV[a - 1]), tonumber(ARGV[a])
  local size = k + 2
  local open = math.floor(now / width)
  -- last: the bucket the state last counted in, -1 if nothing counts;
  -- top, base: cum(last) and cum(open-k-1), what the window holds between
  local last, top, base = -1, 0, 0
  if v and #v == 8 + 8 * size then
    last = sunpack('<i8', v)
    if last >= open and last - open <= k then
      open = last
    elseif last > open or open - last > k then
      last = -1
    end
    if last >= 0 then
      top = sunpack('<i8', v, 9 + 8 * (last % size))
      base = sunpack('<i8', v, 9 + 8 * ((open - k - 1) % size))
    end
  end
  if rooms then rooms[j] = limit - (top - base) end
  if top - base + n > limit then
    -- Bucket b leaves the window when bucket b+k+1 opens, freeing
    -- cum(b) - base: walk the oldest until they free enough.
    local need, b = top - base + n - limit, open - k
    if last < 0 then b = open end
    while b < open do
      local cum = top
      if b <= last then cum = sunpack('<i8', v, 9 + 8 * (b % size)) end
      if cum - base >= need then break end
      b = b + 1
    end
    local r = (b + k + 1) * width - now
    if r > retry then refused, retry = j - 1, r end
    if counted > j - 1 then counted = j - 1 end
  elseif refused < 0 then
    local i, cum = open % size, top + n
    if last == open and cum < 4503599627370496 then
      redis.call('SETRANGE', key, format('%d', 8 + 8 * i), spack('<i8', cum))
    else
      local z = '\0\0\0\0\0\0\0\0'
      if last < 0 then
        v = spack('<i8', open) .. z:rep(i) .. spack('<i8', cum) .. z:rep(size - i - 1)
      elseif cum < 4503599627370496 then
        -- Places s .. s+m-1 (mod size) take buckets last+1 .. open.
        local m, s = open - last, (last + 1) % size
        local new = spack('<i8', top):rep(m - 1) .. spack('<i8', cum)
        if s + m <= size then
          v = spack('<i8', open) .. v:sub(9, 8 + 8 * s) .. new .. v:sub(9 + 8 * (s + m))
        else
          local e = s + m - size
          v = spack('<i8', open) .. new:sub(8 * (size - s) + 1) .. v:sub(9 + 8 * e, 8 + 8 * s) .. new:sub(1, 8 * (size - s))
        end
      else
        -- Rebase: every bucket of the window, open-k-1 .. open, less base.
        local ring = {}
        for b = open - k - 1, open do
          local c = top
          if b == open then c = cum elseif b <= last then c = sunpack('<i8', v, 9 + 8 * (b % size)) end
          ring[b % size + 1] = spack('<i8', c - base)
        end
        v = spack('<i8', open) .. table.concat(ring)
      end
      redis.call('SET', key, v, 'PX', format('%d', math.ceil(((open + k + 1) * width - now) / 1000)))
    end
  end
end
local function answer()
  local reply = { refused, retry, now }
  for j = 1, #KEYS do reply[3 + j] = rooms[j] end
  return reply
end
if refused < 0 then
  if rooms then return answer() end
  return now
end
for u = 1, counted do
  local old, a = vals[u], 4 * u
  local width, k = tonumber(ARGV[a - 1]), tonumber(ARGV[a])
  local ttl = 0
  if old and #old == 8 + 8 * (k + 2) then
    ttl = math.ceil(((sunpack('<i8', old) + k + 1) * width - now) / 1000)
  end
  if ttl > 0 then
    redis.call('SET', KEYS[u], old, 'PX', format('%d', ttl))
  else
    redis.call('DEL', KEYS[u])
  end
end
if rooms then return answer() end
return { refused, retry, now }
