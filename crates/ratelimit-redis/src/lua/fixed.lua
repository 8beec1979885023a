-- Fixed window: state (end, count). Windows are in phase with `phase`
-- (0 when aligned, the key's offset with key-offset), or open at the first
-- admitted request (first = 1).
local phase = tonumber(ARGV[11])
local first = ARGV[12] == '1'

-- The first window end after now, for windows of phase `phase`.
local function next_end()
  local pos = fmod(time_mod(s, n) - phase + P, P)
  return norm(s, n + P - pos)
end

local es, en, cnt
local v = redis.call('GET', key)
if v then
  local a, b, c = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
  if not a then corrupt() end
  es, en, cnt = tonumber(a), tonumber(b), tonumber(c)
else
  if op == 'r' then return {0, 0, 0, 0} end
  cnt = 0
  if first then es, en = 0, 0 else es, en = next_end() end
end

-- Roll: a window that has ended is closed.
if tdiff(s, n, es, en) >= 0 then
  cnt = 0
  if not first then es, en = next_end() end
end

local function save()
  local left = tdiff(es, en, s, n)
  -- A count of 0 is kept while its window lasts: with first-request
  -- windows the end still matters, as in ratelimit-core.
  if left <= 0 then
    redis.call('DEL', key)
  else
    redis.call('SET', key, fmt_time(es, en) .. ':' .. string.format('%d', cnt), 'PX', ttl_ms(left))
  end
end

if op == 'r' then
  local d = tdiff(as, an, es, en)           -- admitted_at - end
  if d < 0 and d + P >= 0 and cnt > 0 then
    cnt = cnt - math.min(cost, cnt)
    save()
  end
  return {0, 0, 0, 0}
end

local function decide(allowed, wait)
  local reset = 0
  if cnt > 0 then reset = tdiff(es, en, s, n) end
  -- next: full, nothing comes back before the window ends.
  local nxt = 0
  if cnt >= L then nxt = reset end
  return {allowed, L - cnt, wait, reset, nxt}
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
