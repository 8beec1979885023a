-- Sliding window: state (start of the current window, prev, cur).
--
-- ARGV[1..7] as in common.lua; then, the fields of `SlidingArgs` (src/args.rs)
-- in order (a test compares the two lists):
-- ARGV[8]   period: P in ns
-- ARGV[9]   limit: L
-- ARGV[10]  period_g: P / gcd(P, 1e9)
-- ARGV[11]  stamp: live settings 's:P:L:Pg' (live stores only)

-- floor(a * P / m), for a result below 2^52.
local function times_p_over(a, m)
  local pq, pr = divmod(P, m)
  local q = muldivmod(a, pr, m)
  return a * pq + q
end

-- Live settings: the stamp 's:P:L:Pg', the algorithm's fourth
-- parameter (see common.lua).
local STAMP = ARGV[11]

local v, st = read_live(STAMP)
local vs, vn, vp, vc
if v then
  vs, vn, vp, vc = string.match(v, '^(%-?%d+):(%d+):(%d+):(%d+)$')
  if not vs then corrupt() end
  vs, vn = tonumber(vs), tonumber(vn)
  -- The server's clock stepped back before the stored window: stay in it.
  if server_time and tdiff(s, n, vs, vn) < 0 then s, n = vs, vn end
elseif op == 'r' and not foreign then
  return {0, 0, 0, 0}
elseif op == 'd' and not foreign then
  op, cost = 'u', 0
end
local e = time_mod(s, n)
local left = P - e
local cs, cn = norm(s, n - e)
local prev, cur = 0, 0
local carried = false
if v and st and st ~= STAMP then
  -- Carry-over, as ratelimit-core's LiveAlgorithm: the counts rolled to
  -- now under the old period; with the same period both are kept (past
  -- the new limit if so), with another the old estimate now, rounded up,
  -- becomes the count of the new window holding now.
  local old = stamp_numbers(st)
  local oP, oPg = old[1], old[3]
  local eo = time_mod_p(s, n, oP, oPg)
  local ws, wn = norm(s, n - eo)
  local delta = tdiff(ws, wn, vs, vn)
  local p0, c0 = 0, 0
  if delta == 0 then
    p0, c0 = tonumber(vp), tonumber(vc)
  elseif delta == oP then
    p0 = tonumber(vc)
  end
  if oP == P then
    prev, cur = p0, c0
  else
    local q, r = muldivmod(p0, oP - eo, oP)
    if r > 0 then q = q + 1 end
    cur = c0 + q
  end
  carried = true
elseif foreign then
  -- A state of another kind: what it used, as this window's count.
  cur = foreign
  carried = true
elseif v then
  local delta = tdiff(cs, cn, vs, vn)
  if delta == 0 then
    prev, cur = tonumber(vp), tonumber(vc)
  elseif delta == P then
    prev = tonumber(vc)
  end
end

local function save()
  if prev == 0 and cur == 0 then
    redis.call('DEL', key)
  else
    local body = fmt_time(cs, cn) .. string.format(':%d:%d', prev, cur)
    redis.call('SET', key, with_stamp(body, STAMP), 'PX', ttl_ms(left + P))
  end
end
if carried then save() end

if op == 'r' or op == 'd' then
  local ea = time_mod(as, an)
  local cas, can = norm(as, an - ea)
  local d = tdiff(cs, cn, cas, can)
  if d == 0 then
    cur = cur - math.min(cost, cur)
  elseif d == P then
    prev = prev - math.min(cost, prev)
  end
  save()
  if op == 'r' then return {0, 0, 0, 0} end
  op, cost = 'u', 0
end

-- The wait until a request of n (at most L) fits, or nil if it fits now:
-- admitted iff prev*(P - e) <= (L - cur - n)*P.
local function wait_for(n)
  local room = L - cur - n
  local q, r = muldivmod(prev, left, P)
  if r > 0 then q = q + 1 end
  if room >= 0 and q <= room then return nil end
  if room >= 0 then return left - times_p_over(room, prev) end
  return left + math.max(0, P - times_p_over(L - n, cur))
end

local function decide(allowed, wait)
  local q, r = muldivmod(prev, left, P)
  local rem = L - cur - q
  if r > 0 then rem = rem - 1 end
  if rem < 0 then rem = 0 end
  local reset = 0
  if cur > 0 then reset = left + P elseif prev > 0 then reset = left end
  local nxt = 0
  if rem == 0 then nxt = wait_for(1) or 0 end
  return {allowed, rem, wait, reset, nxt}
end

if op == 'u' then
  -- Past the limit the key is in debt until the count ages out; the
  -- current count at most 2L (or what it is, if more).
  if cost > 0 then
    cur = math.min(cur + math.min(cost, 2 * L), math.max(2 * L, cur))
    save()
  end
  local debt = wait_for(0)
  if debt then return decide(0, debt) end
  return decide(1, 0)
end
if cost == 0 then return decide(1, 0) end
if cost > L then return decide(0, -1) end
local wait = wait_for(cost)
if not wait then
  cur = cur + cost
  save()
  return decide(1, 0)
end
return decide(0, wait)
