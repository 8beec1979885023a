-- ratelimit-redis: live carry-over between kinds (after common.lua in
-- every script). A state written under a stamp of another kind is read
-- for the quota it has used now, in whole requests rounded up (past its
-- limit if it was over it), as ratelimit-core's LiveAlgorithm reads it;
-- the key is deleted and `foreign` holds that count, which the script
-- charges at now under its own settings.

-- ceil(x / T) for x = (xw, xf) and T = (tw, tf), pairs of scale o (x >= 0).
local function steps_ceil(xw, xf, tw, tf, o)
  local k = floor((xw + xf / o) / (tw + tf / o))
  if k < 0 then k = 0 end
  -- k * T as a pair.
  local function times(j)
    local q, r = divmod(j * tf, o)
    return j * tw + q, r
  end
  local function le2(aw, af, bw, bf) return aw < bw or (aw == bw and af <= bf) end
  while k > 0 do
    local mw, mf = times(k)
    if le2(mw, mf, xw, xf) then break end
    k = k - 1
  end
  while true do
    local mw, mf = times(k + 1)
    if not le2(mw, mf, xw, xf) then break end
    k = k + 1
  end
  local mw, mf = times(k)
  if mw == xw and mf == xf then return k end
  return k + 1
end

-- The used quota of a string state `body` under stamp `st`, at now.
local function string_used(body, st)
  local kind, num = string.sub(st, 1, 1), stamp_numbers(st)
  if kind == 'g' or kind == 'l' then
    -- 'g:sc:sw:sf:..': TAT - now; 'l:sc:sw:sf:..': D - now + T.
    local ts, tn, tf = string.match(body, '^(%-?%d+):(%d+):(%d+)$')
    if not ts then return 0 end
    local o, tw, tfs = num[1], num[2], num[3]
    local xw, xf = tdiff(tonumber(ts), tonumber(tn), s, n), tonumber(tf)
    if kind == 'l' then
      xf = xf + tfs
      xw = xw + tw
      if xf >= o then xw, xf = xw + 1, xf - o end
    end
    if xw < 0 then return 0 end
    return steps_ceil(xw, xf, tw, tfs, o)
  elseif kind == 'f' then
    -- 'f:P:L:anchor', body 'end:count': the count while its window lasts.
    local es, en, cnt = string.match(body, '^(%-?%d+):(%d+):(%d+)$')
    if not es or tdiff(s, n, tonumber(es), tonumber(en)) >= 0 then return 0 end
    return tonumber(cnt)
  elseif kind == 's' then
    -- 's:P:L:Pg', body 'start:prev:cur': the estimate now, rounded up.
    local vs, vn, vp, vc = string.match(body, '^(%-?%d+):(%d+):(%d+):(%d+)$')
    if not vs then return 0 end
    local oP, oPg = num[1], num[3]
    local eo = time_mod_p(s, n, oP, oPg)
    local ws, wn = norm(s, n - eo)
    local delta = tdiff(ws, wn, tonumber(vs), tonumber(vn))
    local p0, c0 = 0, 0
    if delta == 0 then p0, c0 = tonumber(vp), tonumber(vc)
    elseif delta == oP then p0 = tonumber(vc) end
    local q, r = muldivmod(p0, oP - eo, oP)
    if r > 0 then q = q + 1 end
    return c0 + q
  end
  return 0
end

-- The used quota of a sliding log (a hash, its stamp 'o:P:L' in field
-- 's'): the cost of the entries that count now under its period.
local function log_used()
  local meta = redis.call('HMGET', key, 'h', 't', 's', 'u')
  local h, t = tonumber(meta[1]) or 0, tonumber(meta[2]) or 0
  -- Without its stamp, all it logged.
  if not meta[3] then return tonumber(meta[4]) or 0 end
  local oP = stamp_numbers(meta[3])[1]
  local u = 0
  for i = h, t - 1 do
    local v = redis.call('HGET', key, i) or ''
    local a, b, c = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
    if a and tdiff(tonumber(a), tonumber(b), s, n) + oP > 0 then u = u + tonumber(c) end
  end
  return u
end

-- A state at the key of a kind other than `stamp`'s (a string of
-- another kind, or a log): its used quota into `foreign`, then deleted.
-- Returns whether there was one.
local function take_foreign(t, stamp, body, st)
  if t == 'hash' then
    foreign = log_used()
  elseif st and string.sub(st, 1, 2) ~= string.sub(stamp, 1, 2) then
    foreign = string_used(body, st)
  else
    return false
  end
  redis.call('DEL', key)
  if foreign == 0 then foreign = nil end
  return true
end

-- The text of a string state at the key and its stamp (nil, nil: absent,
-- or a state of another kind, read into `foreign` and deleted).
local function read_live(stamp)
  if not stamp then return redis.call('GET', key), nil end
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' then return nil, nil end
  if t ~= 'string' then
    if not take_foreign(t, stamp) then redis.call('DEL', key) end
    return nil, nil
  end
  local v = redis.call('GET', key)
  local body, st = string.match(v, '^([^|]*)|(.+)$')
  if not body then
    redis.call('DEL', key)
    return nil, nil
  end
  if take_foreign(t, stamp, body, st) then return nil, nil end
  return body, st
end
