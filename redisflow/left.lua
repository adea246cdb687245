-- How many permits a key may take now under each of its windows, counting
-- nothing, on the Redis server's clock: the least, over the windows, of the
-- window's limit less what it holds. It reads the strings keyed.lua
-- writes, as keyed.lua reads them, and writes nothing.
--
-- KEYS[j]       window j's state for the key, a string (absent: empty)
-- ARGV[3j-2]    limit  window j's limit for the key
-- ARGV[3j-1]    width  window j's bucket width, in microseconds
-- ARGV[3j]      k      window j's buckets per interval
--
-- Returns the least room, an integer: negative when a window holds more
-- than the limit it is given (a limit lowered).
local tonumber, sunpack = tonumber, struct.unpack
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local vals
if #KEYS == 1 then vals = { redis.call('GET', KEYS[1]) } else vals = redis.call('MGET', unpack(KEYS)) end
local least
for j = 1, #KEYS do
  local v, a = vals[j], 3 * j
  local limit, width, k = tonumber(ARGV[a - 2]), tonumber(ARGV[a - 1]), tonumber(ARGV[a])
  local size = k + 2
  local open = math.floor(now / width)
  local held = 0
  if v and #v == 8 + 8 * size then
    local last = sunpack('<i8', v)
    if last >= open and last - open <= k then
      open = last
    elseif last > open or open - last > k then
      last = -1
    end
    if last >= 0 then
      held = sunpack('<i8', v, 9 + 8 * (last % size)) - sunpack('<i8', v, 9 + 8 * ((open - k - 1) % size))
    end
  end
  if least == nil or limit - held < least then least = limit - held end
end
return least
