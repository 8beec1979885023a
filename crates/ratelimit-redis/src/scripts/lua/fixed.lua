-- Fixed window: state (end, count). Windows are in phase with `phase`
-- (0 when aligned, the key's offset with key-offset, 4 days for calendar
-- weeks), open at the first admitted request (windows = '1'), or are the
-- months of the UTC calendar (windows = 'M').
--
-- ARGV[1..7] as in common.lua; then, the fields of `FixedArgs` (src/args.rs)
-- in order (a test compares the two lists):
-- ARGV[8]   period: P in ns (with months: a day, unused)
-- ARGV[9]   limit: L
-- ARGV[10]  period_g: P / gcd(P, 1e9)
-- ARGV[11]  phase: the windows' phase in ns (the key's, with key-offset)
-- ARGV[12]  windows: '0' in phase, '1' opened by the first admitted
--           request, 'M' calendar months
-- ARGV[13]  stamp: live settings 'f:P:L:anchor' (live stores only)
local phase = tonumber(ARGV[11])
local first = ARGV[12] == '1'
local months = ARGV[12] == 'M'

-- The month holding the second `ts` (days since 1970-01-01 to a date by
-- H. Hinnant's civil_from_days, and back): its first second and the
-- first of the next month, as ratelimit-core's CalendarUnit::window.
local function month_of(ts)
  local z = divmod(ts, 86400) + 719468
  local era, doe = divmod(z, 146097)
  local yoe = divmod(doe - divmod(doe, 1460) + divmod(doe, 36524) - divmod(doe, 146096), 365)
  local doy = doe - (365 * yoe + divmod(yoe, 4) - divmod(yoe, 100))
  local mp = divmod(5 * doy + 2, 153)                    -- March is 0
  local first_day = z - doy + divmod(153 * mp + 2, 5) - 719468
  -- Its length: March..January (mp 0..10) as the rhyme says, February
  -- by the leap rule for its civil year (the year after yoe's March).
  local len = 31
  if mp == 1 or mp == 3 or mp == 6 or mp == 8 then len = 30 end
  if mp == 11 then
    local y = era * 400 + yoe + 1
    len = 28
    if fmod(y, 4) == 0 and (fmod(y, 100) ~= 0 or fmod(y, 400) == 0) then len = 29 end
  end
  return first_day * 86400, (first_day + len) * 86400
end

-- The length in ns of the month ending at the second `ee_s`.
local function month_len(ee_s)
  local a = month_of(ee_s - 1)
  return (ee_s - a) * 1e9
end

-- The first window end after now, for windows of phase `phase`.
local function next_end()
  if months then
    local _, e = month_of(s)
    return e, 0
  end
  local pos = fmod(time_mod(s, n) - phase + P, P)
  return norm(s, n + P - pos)
end

-- Live settings: the stamp 'f:P:L:anchor', the algorithm's sixth
-- parameter (see common.lua); the anchor is a (aligned), r (first
-- request), k (key offset), w (calendar week) or M (calendar month).
local STAMP = ARGV[13]

local es, en, cnt
local function save_at(left)
  if left <= 0 then
    redis.call('DEL', key)
  else
    local body = fmt_time(es, en) .. ':' .. string.format('%d', cnt)
    redis.call('SET', key, with_stamp(body, STAMP), 'PX', ttl_ms(left))
  end
end

local v, st = read_live(STAMP)
if v then
  local a, b, c = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
  if not a then corrupt() end
  es, en, cnt = tonumber(a), tonumber(b), tonumber(c)
  if st and st ~= STAMP then
    -- Carry-over, as ratelimit-core's LiveAlgorithm: the count of the old
    -- window open now (none once it ended), whole (past the new limit if
    -- so), in the new window holding now; a first-request window keeps
    -- its start, or opens now once the new period has passed since.
    local oP = stamp_numbers(st)[1]
    if string.sub(st, -2) == ':M' then oP = month_len(es) end
    if tdiff(s, n, es, en) >= 0 then cnt = 0 end
    if cnt > 0 and first then
      local ss, sn = norm(es, en - oP)
      if tdiff(s, n, ss, sn) >= P then es, en = norm(s, n + P) else es, en = norm(ss, sn + P) end
    elseif cnt > 0 then
      es, en = next_end()
    end
    if cnt == 0 then
      v = nil
      redis.call('DEL', key)
    else
      save_at(tdiff(es, en, s, n))
    end
  end
end
if not v and foreign then
  -- A state of another kind: what it used, charged now, in the window
  -- holding now (a first-request window opens now).
  cnt = foreign
  if first then es, en = norm(s, n + P) else es, en = next_end() end
  save_at(tdiff(es, en, s, n))
  v = true
end
if not v then
  if op == 'r' then return {0, 0, 0, 0} end
  if op == 'd' then op, cost = 'u', 0 end
  cnt = 0
  if first then es, en = 0, 0 else es, en = next_end() end
end

-- Roll: a window that has ended is closed.
if tdiff(s, n, es, en) >= 0 then
  cnt = 0
  if not first then es, en = next_end() end
end

-- A count of 0 is kept while its window lasts: with first-request
-- windows the end still matters, as in ratelimit-core.
local function save()
  save_at(tdiff(es, en, s, n))
end

if op == 'r' or op == 'd' then
  local d = tdiff(as, an, es, en)           -- admitted_at - end
  local len = P
  if months then len = month_len(es) end
  if d < 0 and d + len >= 0 and cnt > 0 then
    cnt = cnt - math.min(cost, cnt)
    save()
  end
  if op == 'r' then return {0, 0, 0, 0} end
  op, cost = 'u', 0
end

local function decide(allowed, wait)
  local reset = 0
  if cnt > 0 then reset = tdiff(es, en, s, n) end
  -- next: full, nothing comes back before the window ends.
  local nxt = 0
  if cnt >= L then nxt = reset end
  return {allowed, math.max(0, L - cnt), wait, reset, nxt}
end

if op == 'u' then
  -- Past L the key is in debt until the window ends; at most 2L.
  if cost > 0 then
    if tdiff(s, n, es, en) >= 0 then
      es, en = norm(s, n + P)                -- first request: opens now
    end
    cnt = math.min(cnt + math.min(cost, 2 * L), math.max(2 * L, cnt))
    save()
  end
  if cnt > L then return decide(0, tdiff(es, en, s, n)) end
  return decide(1, 0)
end
if cost == 0 then return decide(1, 0) end
if cost > L then return decide(0, -1) end
if cnt + cost <= L then
  if tdiff(s, n, es, en) >= 0 then
    es, en = norm(s, n + P)                  -- first request: opens now
  end
  cnt = cnt + cost
  save()
  return decide(1, 0)
end
return decide(0, tdiff(es, en, s, n))
