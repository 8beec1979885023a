-- Announces an instance in a roster and counts those seen lately.
-- KEYS[1]: the roster, a sorted set of instance ids scored by the time
-- (ms, Redis's clock) each was last seen. ARGV[1]: this instance's id.
-- ARGV[2]: how long (ms) an instance counts after it was last seen.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local within = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - within)
redis.call('PEXPIRE', KEYS[1], within)
return redis.call('ZCARD', KEYS[1])
