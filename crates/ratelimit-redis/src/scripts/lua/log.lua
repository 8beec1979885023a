-- Sliding log: a hash used as a deque. Fields: u (the logged cost), h (the
-- oldest entry's index), t (one past the newest), and entry i as
-- 'seconds:nanoseconds:cost'. At most L entries, as in ratelimit-core
-- (past a live change to a smaller limit, as many as the larger one let
-- in).
--
-- ARGV[1..7] as in common.lua; then, the fields of `LogArgs` (src/args.rs)
-- in order (a test compares the two lists):
-- ARGV[8]   period: P in ns
-- ARGV[9]   limit: L
-- ARGV[10]  period_g: P / gcd(P, 1e9)
-- ARGV[11]  exact: '1': exact-match log
-- ARGV[12]  stamp: live settings 'o:P:L' (live stores only)
local exact = ARGV[11] == '1'
-- Live settings: the stamp 'o:P:L', the algorithm's fifth parameter (see
-- common.lua). Only the log is a hash, so a string is another kind's
-- state: what it used is charged now, in one entry (see carry.lua).
local STAMP = ARGV[12]
if STAMP then
  local ty = redis.call('TYPE', key)['ok']
  if ty == 'string' then
    local body, st = string.match(redis.call('GET', key), '^([^|]*)|(.+)$')
    if body then take_foreign(ty, STAMP, body, st) end
    redis.call('DEL', key)
    if foreign then
      redis.call('HSET', key, 0, fmt_time(s, n) .. string.format(':%d', foreign),
        'u', foreign, 'h', 0, 't', 1, 's', STAMP)
      redis.call('PEXPIRE', key, ttl_ms(P))
    end
  elseif ty ~= 'none' and ty ~= 'hash' then
    redis.call('DEL', key)
  end
end
local meta = redis.call('HMGET', key, 'u', 'h', 't', 's')
local u, h, t = tonumber(meta[1]) or 0, tonumber(meta[2]) or 0, tonumber(meta[3]) or 0
local changed = false

local function entry(i)
  local v = redis.call('HGET', key, i)
  if not v then corrupt() end
  local a, b, c = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
  if not a then corrupt() end
  return tonumber(a), tonumber(b), tonumber(c)
end
local function fmt_entry(ts, tn, c)
  return fmt_time(ts, tn) .. string.format(':%d', c)
end

-- The server's clock stepped back before the newest entry: stay there.
if server_time and h < t then
  local es, en = entry(t - 1)
  if tdiff(s, n, es, en) < 0 then s, n = es, en end
end

-- Carry-over from other numbers, as ratelimit-core's LiveAlgorithm:
-- entries that no longer count under the old period go; those a shorter
-- new period would drop at once are merged into one entry at
-- now - P + 1, so the change frees nothing.
if STAMP and h < t and meta[4] and meta[4] ~= STAMP then
  local oP = stamp_numbers(meta[4])[1]
  local early, last = 0, nil
  while h < t do
    local es, en, c = entry(h)
    local age = tdiff(s, n, es, en)
    if age < P and age < oP then break end
    if age >= oP then u = u - c else early = early + c end
    redis.call('HDEL', key, h)
    last = h
    h = h + 1
  end
  if early > 0 then
    h = last
    local ts, tn = norm(s, n - P + 1)
    redis.call('HSET', key, h, fmt_entry(ts, tn, early))
  end
  if h >= t then redis.call('DEL', key) else redis.call('HSET', key, 'u', u, 'h', h, 't', t) end
end

-- Entries at or before now - P no longer count.
while h < t do
  local es, en, c = entry(h)
  if tdiff(es, en, s, n) + P > 0 then break end
  u = u - c
  redis.call('HDEL', key, h)
  h = h + 1
  changed = true
end

-- Under settings other than those the log was last written under, its
-- life is set anew: the newest entry counts for the new period.
if STAMP and h < t and meta[4] ~= STAMP then
  local es, en = entry(t - 1)
  redis.call('HSET', key, 's', STAMP)
  redis.call('PEXPIRE', key, ttl_ms(tdiff(es, en, s, n) + P))
end

local function persist()
  if not changed then return end
  if h >= t then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 'u', u, 'h', h, 't', t)
  end
end

if op == 'r' or op == 'd' then
  local idx
  if exact then
    for i = t - 1, h, -1 do
      local es, en = entry(i)
      if es == as and en == an then idx = i; break end
    end
  else
    -- Server time: the caller's admitted_at is only known up to the
    -- latency, so the entry closest to it is refunded.
    local best
    for i = t - 1, h, -1 do
      local es, en = entry(i)
      local d = tdiff(es, en, as, an)
      if not best or math.abs(d) < best then best = math.abs(d); idx = i end
      if d < 0 and -d > best then break end
    end
  end
  if idx then
    local es, en, c = entry(idx)
    local back = math.min(cost, c)
    u = u - back
    if c == back then
      for j = idx + 1, t - 1 do
        redis.call('HSET', key, j - 1, redis.call('HGET', key, j))
      end
      redis.call('HDEL', key, t - 1)
      t = t - 1
    else
      redis.call('HSET', key, idx, fmt_entry(es, en, c - back))
    end
    changed = true
  end
  persist()
  if op == 'r' then return {0, 0, 0, 0} end
  op, cost = 'u', 0
end

local function decide(allowed, wait)
  local reset = 0
  if h < t then
    local es, en = entry(t - 1)
    reset = tdiff(es, en, s, n) + P
  end
  -- next: full, one unit comes back when enough of the oldest entries
  -- expire (one, unless a live change left the log over the limit).
  local nxt = 0
  if u >= L and h < t then
    local freed = 0
    for i = h, t - 1 do
      local es, en, c = entry(i)
      freed = freed + c
      if freed >= u - L + 1 then nxt = tdiff(es, en, s, n) + P; break end
    end
  end
  return {allowed, math.max(0, L - u), wait, reset, nxt}
end

if op == 'u' then
  -- Logged at now whatever is left, the sum at most 2L (or what it is,
  -- if more); once the log holds L entries a charge merges into the
  -- newest, moved to now, so it never holds more.
  local c = math.min(cost, math.max(2 * L, u) - u)
  if c > 0 then
    local merge = false
    if h < t then
      local es, en = entry(t - 1)
      merge = t - h >= L or (es == s and en == n)
    end
    if merge then
      local _, _, lc = entry(t - 1)
      redis.call('HSET', key, t - 1, fmt_entry(s, n, lc + c))
    else
      redis.call('HSET', key, t, fmt_entry(s, n, c))
      t = t + 1
    end
    u = u + c
    redis.call('HSET', key, 'u', u, 'h', h, 't', t)
    if STAMP then redis.call('HSET', key, 's', STAMP) end
    redis.call('PEXPIRE', key, ttl_ms(P))
  else
    persist()
  end
  if u <= L then return decide(1, 0) end
  local freed, debt = 0, 0
  for i = h, t - 1 do
    local es, en, lc = entry(i)
    freed = freed + lc
    if freed >= u - L then debt = tdiff(es, en, s, n) + P; break end
  end
  return decide(0, debt)
end
if cost == 0 then persist(); return decide(1, 0) end
if cost > L then persist(); return decide(0, -1) end
if u + cost <= L then
  local merged = false
  if h < t then
    local es, en, c = entry(t - 1)
    if es == s and en == n then
      redis.call('HSET', key, t - 1, fmt_entry(es, en, c + cost))
      merged = true
    end
  end
  if not merged then
    redis.call('HSET', key, t, fmt_entry(s, n, cost))
    t = t + 1
  end
  u = u + cost
  redis.call('HSET', key, 'u', u, 'h', h, 't', t)
  -- A live log records the settings it was written under.
  if STAMP then redis.call('HSET', key, 's', STAMP) end
  redis.call('PEXPIRE', key, ttl_ms(P))
  return decide(1, 0)
end
-- Denied: drop the oldest entries until the request fits.
local need = u + cost - L
local freed, wait = 0, 0
for i = h, t - 1 do
  local es, en, c = entry(i)
  freed = freed + c
  if freed >= need then
    wait = tdiff(es, en, s, n) + P
    break
  end
end
persist()
return decide(0, wait)
