-- Scaled quantities (GCRA, token bucket, leaky bucket). Time is counted in
-- units of 1/sc ns, so that T = P/L is the whole number step. A scaled
-- quantity x is held as a pair (w, f): x = w*sc + f with 0 <= f < sc, so w
-- is whole nanoseconds (bounded by the window) and f a remainder below sc.
-- Pairs compare lexicographically.
local sc = tonumber(ARGV[8])
local sw, sf = tonumber(ARGV[9]), tonumber(ARGV[10])   -- T

local function le(aw, af, bw, bf)
  return aw < bw or (aw == bw and af <= bf)
end
local function add(aw, af, bw, bf)
  local f = af + bf
  if f >= sc then return aw + bw + 1, f - sc end
  return aw + bw, f
end
local function sub(aw, af, bw, bf)
  local f = af - bf
  if f < 0 then return aw - bw - 1, f + sc end
  return aw - bw, f
end
-- k * (bw, bf), for k * sc < 2^53.
local function mul(k, bw, bf)
  local q, r = divmod(k * bf, sc)
  return k * bw + q, r
end
-- Scaled units to ns, rounded up.
local function ceil_ns(aw, af)
  if af > 0 then return aw + 1 end
  return aw
end
-- floor(a / T) for a >= 0: a double estimate, then made exact.
local function per_step(aw, af)
  local q = floor((aw + af / sc) / (sw + sf / sc))
  if q < 0 then q = 0 end
  while q > 0 do
    local mw, mf = mul(q, sw, sf)
    if le(mw, mf, aw, af) then break end
    q = q - 1
  end
  while true do
    local mw, mf = mul(q + 1, sw, sf)
    if not le(mw, mf, aw, af) then break end
    q = q + 1
  end
  return q
end

-- Live settings: the stamp 'k:sc:sw:sf:cw:cf' (k = 'g' or 'l'), the
-- algorithm's seventh parameter (see common.lua).
local STAMP = ARGV[14]

-- Scaled pairs of another scale `o`: (aw, af) - (bw, bf) and k * (bw, bf).
local function sub_o(aw, af, bw, bf, o)
  local f = af - bf
  if f < 0 then return aw - bw - 1, f + o end
  return aw - bw, f
end
local function add_o(aw, af, bw, bf, o)
  local f = af + bf
  if f >= o then return aw + bw + 1, f - o end
  return aw + bw, f
end
local function mul_o(k, bw, bf, o)
  local q, r = divmod(k * bf, o)
  return k * bw + q, r
end

-- Carry-over: `x` = (xw, xf), a quantity of scale `o` whose step is
-- (ow, of), as a quantity of this scale: ceil(x * T / T_o), in whole
-- steps k plus the rest, past the capacity if so (the overshoot is
-- kept). As ratelimit-core's LiveAlgorithm rescales (rounded up: a
-- client never gains quota by a change).
local function rescale(xw, xf, o, ow, of)
  -- k = floor(x / T_o): a double estimate, then made exact.
  local k = floor((xw + xf / o) / (ow + of / o))
  if k < 0 then k = 0 end
  while k > 0 do
    local mw, mf = mul_o(k, ow, of, o)
    if le(mw, mf, xw, xf) then break end
    k = k - 1
  end
  while true do
    local mw, mf = mul_o(k + 1, ow, of, o)
    if not le(mw, mf, xw, xf) then break end
    k = k + 1
  end
  local mw, mf = mul_o(k, ow, of, o)
  local rw, rf = sub_o(xw, xf, mw, mf, o)
  -- The rest, below T_o < 2^51, as one number; then rest * T / T_o.
  local step_o = ow * o + of
  local q, r = muldiv(rw * o + rf, sw * sc + sf, step_o)
  if r > 0 then q = q + 1 end
  local kw, kf = mul(k, sw, sf)
  local qw, qf = divmod(q, sc)
  return add(kw, kf, qw, qf)
end

-- Stores now + (ow, of); the key lives ttl_ns (plus slack).
local function write(ow, of, ttl_ns)
  local ts, tn = norm(s, n + ow)
  local body = fmt_time(ts, tn) .. ':' .. string.format('%d', of)
  redis.call('SET', key, with_stamp(body, STAMP), 'PX', ttl_ms(ttl_ns))
end

-- The stored scaled time minus now, as a pair, or nil when absent. A live
-- state written under other settings is given to `carry(dw, df, o, old)`
-- (`old`: the old stamp's numbers after the scale `o`), which returns it
-- under the current ones (nil: empty) and the key's TTL, written back.
local function read_ahead(carry)
  local v, st = read_live(STAMP)
  if not v then return nil end
  local ts, tn, tf = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
  if not ts then corrupt() end
  local dw, df = tdiff(tonumber(ts), tonumber(tn), s, n), tonumber(tf)
  if st and st ~= STAMP then
    local old = stamp_numbers(st)
    local o = table.remove(old, 1)
    local ttl
    dw, df, ttl = carry(dw, df, o, old)
    if dw then
      write(dw, df, ttl)
    else
      redis.call('DEL', key)
    end
  end
  return dw, df
end
