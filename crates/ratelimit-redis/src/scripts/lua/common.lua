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
-- The arguments, one line each as `ARGV[i]  name: meaning`, the names
-- those of the fields of `CommonArgs` (src/args.rs), in order; a test
-- compares the two lists.
-- ARGV[1]  op: 'c' check, 'r' refund, 'u' settle up, 'd' settle down
-- ARGV[2]  cost: the request's cost
-- ARGV[3]  now_s: now, whole seconds, or '' for the server's TIME
-- ARGV[4]  now_ns: now, nanoseconds in the second
-- ARGV[5]  refund_s: admitted_at seconds, or (server time) the age in ns
-- ARGV[6]  refund_ns: admitted_at nanoseconds
-- ARGV[7]  ttl_slack_ms: TTL slack in milliseconds
-- ARGV[8..] the algorithm's parameters, listed in its own script
--
-- A settlement up ('u') charges `cost` whatever is left: where the
-- algorithm can take it the key goes into debt, up to its capacity (the
-- state holds at most twice what a full key's does); the leaky bucket
-- takes none and fills its queue. A settlement down ('d') is a refund,
-- then a settlement up of 0. Both reply as a check of cost 0 (a peek),
-- denied when the key is in debt, with the wait until it is repaid: as
-- ratelimit-core's `Algorithm::charge`.
local fmod = math.fmod
local floor = math.floor
local TWO53 = 9007199254740992
local key = KEYS[1]
local op = ARGV[1]
local cost = tonumber(ARGV[2])
local server_time = ARGV[3] == ''
local s, n
if server_time then
  -- The server's TIME, read once per call by ban.lua, around every script.
  s, n = server_s, server_n
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
if op == 'r' or op == 'd' then
  if server_time then
    as, an = norm(s, n - tonumber(ARGV[5]))
  else
    as, an = tonumber(ARGV[5]), tonumber(ARGV[6])
  end
end

local function corrupt()
  return error('ratelimit: unreadable state at key ' .. key)
end

-- a * b = q * m + r, exact for a < 2^53, b <= m < 2^52, a*b/m < 2^53.
local function muldivmod(a, b, m)
  local p = a * b
  if p < TWO53 then
    local r = fmod(p, m)
    return (p - r) / m, r
  end
  local q, r = 0, 0
  local bq, br = 0, b                         -- b * 2^i = bq*m + br
  if br >= m then bq, br = 1, br - m end
  while a > 0 do
    local bit = fmod(a, 2)
    if bit == 1 then
      q = q + bq
      r = r + br
      if r >= m then r = r - m; q = q + 1 end
    end
    a = (a - bit) / 2
    bq = bq + bq
    br = br + br
    if br >= m then br = br - m; bq = bq + 1 end
  end
  return q, r
end

-- (a * b) / m as (q, r), for a < m < 2^52 and any b < 2^52.
local function muldiv(a, b, m)
  local bq, br = divmod(b, m)
  local q, r = muldivmod(a, br, m)
  return a * bq + q, r
end

-- a * b mod m, exact for a, b < m < 2^52.
local function mulmod(a, b, m)
  local p = a * b
  if p < TWO53 then return fmod(p, m) end
  local r = 0
  while b > 0 do
    local bit = fmod(b, 2)
    if bit == 1 then r = fmod(r + a, m) end
    a = fmod(a + a, m)
    b = (b - bit) / 2
  end
  return r
end

-- (ts, tn) mod p, with pg = p / gcd(p, 1e9).
local function time_mod_p(ts, tn, p, pg)
  return fmod(mulmod(fmod(ts, pg), fmod(1e9, p), p) + tn, p)
end

-- Live settings (a store following a LiveAlgorithm, see plan.rs): the
-- algorithm's last parameter is the stamp of the settings, 'kind:numbers',
-- and the key is the same whatever the numbers. A string state is stored
-- as 'state|stamp', with the stamp it was written under (a log, a hash,
-- in its field 's'). A change frees nothing, as in ratelimit-core's
-- LiveAlgorithm: a state of the same kind under other numbers is carried
-- over by the algorithm's script, then written back under the current
-- stamp; one of another kind is read for the quota it has used now, in
-- whole requests (`foreign`, see carry.lua), deleted, and the script
-- charges that much at now under its own settings.
-- Without a stamp (an ordinary store) nothing of this runs.

-- The quota used by a state of another kind, read by read_live (nil:
-- none was there).
local foreign = nil

-- The stored text of `body` under `stamp` (none: an ordinary store).
local function with_stamp(body, stamp)
  if stamp then return body .. '|' .. stamp end
  return body
end

-- The numbers of a stamp after its kind.
local function stamp_numbers(st)
  local out = {}
  for x in string.gmatch(string.sub(st, 3), '[^:]+') do
    out[#out + 1] = tonumber(x)
  end
  return out
end
