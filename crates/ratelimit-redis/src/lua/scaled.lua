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

-- The stored scaled time minus now, as a pair, or nil when absent.
local function read_ahead()
  local v = redis.call('GET', key)
  if not v then return nil end
  local ts, tn, tf = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
  if not ts then corrupt() end
  return tdiff(tonumber(ts), tonumber(tn), s, n), tonumber(tf)
end

-- Stores now + (ow, of); the key lives ttl_ns (plus slack).
local function write(ow, of, ttl_ns)
  local ts, tn = norm(s, n + ow)
  redis.call('SET', key, fmt_time(ts, tn) .. ':' .. string.format('%d', of), 'PX', ttl_ms(ttl_ns))
end
