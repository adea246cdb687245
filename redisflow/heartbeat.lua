-- An instance's heartbeat: it says it is alive for ARGV[2] microseconds
-- more, and learns how many instances are.
--
-- KEYS[1]  the sorted set of instances, scored by when they stop counting
-- ARGV[1]  the instance's id
-- ARGV[2]  how long it counts, in microseconds
--
-- Returns the number of instances alive, itself included.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], string.format('%.0f', now + ttl), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now))
-- The key lives as long as its longest-counting instance, which may beat
-- more slowly than this one. At least 1 ms, never 0.
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.max(math.ceil((tonumber(last[2]) - now) / 1000), 1))
return redis.call('ZCARD', KEYS[1])
