-- ratelimit-redis: shared prelude of every script.
--
-- Lua numbers are doubles, exact for integers below 2^53. Absolute times
-- (about 1.7e18 ns since 1970) are never held in one number: a time is a
-- pair (s, n) of whole seconds and nanoseconds in [0, 1e9), and only
-- differences of times (bounded by the limit's window) are ever formed as
-- one number. Every division goes through math.fmod, which is exact, so
-- no quotient is rounded.
--
-- KEYS[1]  the limit's key
-- ARGV[1]  'c' check or 'r' refund
-- ARGV[2]  cost
-- ARGV[3]  now: whole seconds, or '' to read the server's TIME
-- ARGV[4]  now: nanoseconds in the second
-- ARGV[5]  refund: admitted_at seconds, or (server time) the age in ns
-- ARGV[6]  refund: admitted_at nanoseconds
-- ARGV[7]  TTL slack in milliseconds
-- ARGV[8..] the algorithm's parameters
local fmod = math.fmod
local floor = math.floor
local TWO53 = 9007199254740992
local key = KEYS[1]
local op = ARGV[1]
local cost = tonumber(ARGV[2])
local server_time = ARGV[3] == ''
local s, n
if server_time then
  -- Redis < 5 replicates scripts verbatim unless told to replicate their
  -- effects, which a script reading TIME needs; later versions always do.
  if redis.replicate_commands then redis.replicate_commands() end
  local tm = redis.call('TIME')
  s = tonumber(tm[1])
  n = tonumber(tm[2]) * 1000
else
  s = tonumber(ARGV[3])
  n = tonumber(ARGV[4])
end
local slack = tonumber(ARGV[7])

-- Exact floor division of an integer |x| < 2^53 by m > 0.
local function divmod(x, m)
  local r = fmod(x, m)
  if r < 0 then r = r + m end
  return (x - r) / m, r
end

-- The time (ss, nn) with nn brought into [0, 1e9).
local function norm(ss, nn)
  local q, r = divmod(nn, 1e9)
  return ss + q, r
end

-- (as, an) - (bs, bn) in ns: exact while below 2^53 in magnitude, and on
-- the right side of any bound below 2^52 otherwise.
local function tdiff(as, an, bs, bn)
  return (as - bs) * 1e9 + (an - bn)
end

local function fmt_time(ts, tn)
  return string.format('%d:%d', ts, tn)
end

local function ttl_ms(ns)
  if ns < 0 then ns = 0 end
  return floor(ns / 1e6) + 1 + slack
end

-- The refunded request's time.
local as, an
if op == 'r' then
  if server_time then
    as, an = norm(s, n - tonumber(ARGV[5]))
  else
    as, an = tonumber(ARGV[5]), tonumber(ARGV[6])
  end
end

local function corrupt()
  return error('ratelimit: unreadable state at key ' .. key)
end
