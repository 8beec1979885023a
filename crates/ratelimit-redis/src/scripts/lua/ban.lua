-- ratelimit-redis: bans, around every store's script (which runs in
-- place of the marker line in `inner` below, as a function of its own).
--
-- KEYS[#KEYS]  the key's ban: a hash in the key's slot (fields us, un:
--              when the ban ends, seconds and ns; k: earlier offences
--              remembered; fs: when they are forgotten, whole seconds),
--              with a PX expiry past its end; hs, hn, hp: a denial
--              written back after Redis lost the key's state (when it
--              ends, and the limit that denied)
-- The last four ARGV entries, taken off before the store's script runs:
-- ARGV[#ARGV-3]  ban_ms: the ban on a denial, ms (0: no ban on denials)
-- ARGV[#ARGV-2]  ban_escalate: the factor of each repeat offence
-- ARGV[#ARGV-1]  ban_max_ms: the longest ban
-- ARGV[#ARGV]    ban_forgive_ms: offences forgotten this long after a ban
-- ARGV[1] is the store's op, and also 'b': ban for ARGV[2] ms from now;
-- 'w': write a ban back, ARGV[2] ns from now; 'hP': write a denial by
-- limit P back, ARGV[2] ns from now. A write-back only ever moves an end
-- later (two instances writing back one ban leave it as the later one
-- had it), and replies {1, 0, 0, 0} when it wrote, {0, 0, 0, 0} when the
-- key was already refused that long.
--
-- A check of positive cost of a banned key is denied with the reply
-- {2, 0, left, left, left} (left: ns of the ban to run); a check the
-- store's script denies with nothing left (remaining 0, and a wait: not a
-- request that can never fit) bans the key when ban_ms > 0 and answers
-- the same way. A check of positive cost of a key with a written-back
-- denial standing is denied by limit P as a check would be: P admitting
-- runs {1, 0, 0, 0, 0}, then {0, 0, left, left, left}. All in one
-- script: atomic with the check.
local ban_key = KEYS[#KEYS]
KEYS[#KEYS] = nil
local nargv = #ARGV
local ban_ms = tonumber(ARGV[nargv - 3])
local ban_escalate = tonumber(ARGV[nargv - 2])
local ban_max_ms = tonumber(ARGV[nargv - 1])
local ban_forgive_ms = tonumber(ARGV[nargv])
for i = nargv, nargv - 3, -1 do ARGV[i] = nil end

-- The server's time (ARGV[3] ''), read once: the ban, every limit
-- (common.lua takes it from here) and the ban a denial makes are decided
-- at this one instant. Valkey (7.2 on) freezes TIME within a script,
-- Redis 7.0 does not: read more than once, one call would see several.
local server_s, server_n
if ARGV[3] == '' then
  -- Redis < 5 replicates scripts verbatim unless told to replicate their
  -- effects, which a script reading TIME needs; later versions always do.
  if redis.replicate_commands then redis.replicate_commands() end
  local tm = redis.call('TIME')
  server_s, server_n = tonumber(tm[1]), tonumber(tm[2]) * 1000
end

local function inner()
--@inner
end

local function ban_now()
  if server_s then return server_s, server_n end
  return tonumber(ARGV[3]), tonumber(ARGV[4])
end

-- The ns left at (s, n) of a span ending at (es, en) (fields of the ban
-- key, maybe absent), or nil.
local function left_of(es, en, s, n)
  if not es then return nil end
  local left = (tonumber(es) - s) * 1e9 + (tonumber(en) - n)
  if left > 0 then return left end
  return nil
end

-- Keeps the ban key at least ms more.
local function keep(ms)
  if redis.call('PTTL', ban_key) < ms then redis.call('PEXPIRE', ban_key, ms) end
end

-- Bans from (s, n) for len ms, with `strikes` earlier offences
-- remembered for forgive ms after the end; returns the ban in ns.
local function ban_set(s, n, len, strikes, forgive)
  local us = s + math.floor(len / 1000)
  local un = n + math.fmod(len, 1000) * 1e6
  if un >= 1e9 then us, un = us + 1, un - 1e9 end
  redis.call('HMSET', ban_key, 'us', us, 'un', un, 'k', strikes,
    'fs', us + math.ceil(forgive / 1000))
  keep(len + forgive + 1000)
  return len * 1e6
end

local bop = ARGV[1]
if bop == 'b' then
  local s, n = ban_now()
  local k = redis.call('HGET', ban_key, 'k') or 0
  ban_set(s, n, tonumber(ARGV[2]), tonumber(k), 0)
  return {0, 0, 0, 0}
end
local hold_part = string.match(bop, '^h(%d+)$')
if bop == 'w' or hold_part then
  local s, n = ban_now()
  local ns = tonumber(ARGV[2])
  local r = math.fmod(ns, 1e9)
  local es, en = s + (ns - r) / 1e9, n + r
  if en >= 1e9 then es, en = es + 1, en - 1e9 end
  local fs, fn = 'us', 'un'
  if hold_part then fs, fn = 'hs', 'hn' end
  local b = redis.call('HMGET', ban_key, fs, fn)
  if b[1] and (tonumber(b[1]) > es or (tonumber(b[1]) == es and tonumber(b[2]) >= en)) then
    return {0, 0, 0, 0}
  end
  redis.call('HSET', ban_key, fs, es, fn, en)
  if hold_part then redis.call('HSET', ban_key, 'hp', hold_part) end
  keep(math.ceil(ns / 1e6) + 1000)
  return {1, 0, 0, 0}
end
if bop == 'c' and tonumber(ARGV[2]) > 0 then
  local s, n = ban_now()
  local b = redis.call('HMGET', ban_key, 'us', 'un', 'hs', 'hn', 'hp')
  local left = left_of(b[1], b[2], s, n)
  if left then return {2, 0, left, left, left} end
  left = left_of(b[3], b[4], s, n)
  if left then
    local p = math.min(tonumber(b[5] or 0), #KEYS - 1)
    local r = {}
    for i = 1, 5 * p do r[i] = 0 end
    for i = 0, p - 1 do r[5 * i + 1] = 1 end
    r[5 * p + 1], r[5 * p + 2] = 0, 0
    r[5 * p + 3], r[5 * p + 4], r[5 * p + 5] = left, left, left
    return r
  end
end
local r = inner()
if bop == 'c' and ban_ms > 0 and #r >= 5 then
  local last = #r - 4
  -- Denied with nothing left (a lease's larger take that does not fit
  -- bans nothing), and not a request that can never fit.
  if r[last] == 0 and r[last + 1] == 0 and r[last + 2] >= 0 then
    local s, n = ban_now()
    local strikes = 0
    local f = redis.call('HMGET', ban_key, 'fs', 'k')
    if f[1] and s < tonumber(f[1]) then strikes = tonumber(f[2]) + 1 end
    local len = ban_ms
    for _ = 1, math.min(strikes, 64) do
      len = len * ban_escalate
      if len >= ban_max_ms then break end
    end
    len = math.floor(math.min(len, ban_max_ms))
    local ns = ban_set(s, n, len, strikes, ban_forgive_ms)
    return {2, 0, ns, ns, ns}
  end
end
return r
