-- GCRA (and the token bucket): state TAT; used = TAT - t in [0, B*T].
--
-- ARGV[1..7] as in common.lua; then, the fields of `GcraArgs` (src/args.rs)
-- in order (a test compares the two lists):
-- ARGV[8]   scale: time unit: 1/scale ns, T = P/L in those units
-- ARGV[9]   step_w: T, whole part
-- ARGV[10]  step_f: T, remainder below scale
-- ARGV[11]  burst_w: B*T, whole part
-- ARGV[12]  burst_f: B*T, remainder
-- ARGV[13]  burst: B, the burst
-- ARGV[14]  stamp: live settings 'g:numbers' (live stores only)
local cw, cf = tonumber(ARGV[11]), tonumber(ARGV[12])  -- B*T
local burst = tonumber(ARGV[13])

-- Carry-over from other settings (old: sw, sf, cw, cf): the quota used
-- (past the old capacity if it was over it), 0 when behind now, rescaled
-- (past the new capacity if so: the overshoot is kept).
local function carry(dw, df, o, old)
  if dw < 0 then return nil end
  local uw, uf = rescale(dw, df, o, old[1], old[2])
  if uw == 0 and uf == 0 then return nil end
  return uw, uf, ceil_ns(uw, uf)
end

local dw, df = read_ahead(carry)
if foreign then
  -- A state of another kind: what it used, charged now.
  dw, df = mul(foreign, sw, sf)
  write(dw, df, ceil_ns(dw, df))
end

if (op == 'r' or op == 'd') and dw then
  local uw, uf = 0, 0
  if dw >= 0 then uw, uf = dw, df end
  local bw, bf = mul(math.min(cost, burst), sw, sf)
  local rw, rf = sub(uw, uf, bw, bf)
  if rw < 0 or (rw == 0 and rf == 0) then
    redis.call('DEL', key)
    dw, df = nil, nil
  else
    write(rw, rf, ceil_ns(rw, rf))
    dw, df = rw, rf
  end
end
if op == 'r' then return {0, 0, 0, 0} end
if op == 'd' then op, cost = 'u', 0 end

-- A state behind now counts as full; one beyond the capacity (after a
-- live change to a smaller one) is denied until it drains.
local uw, uf = 0, 0
if dw and dw >= 0 then uw, uf = dw, df end

local function decide(allowed, aw, af, wait)
  local rw, rf = sub(cw, cf, aw, af)
  -- next: until one more unit fits, used + T <= B*T.
  local nw, nf = add(aw, af, sw, sf)
  local nxt = 0
  if not le(nw, nf, cw, cf) then nxt = ceil_ns(sub(nw, nf, cw, cf)) end
  return {allowed, per_step(rw, rf), wait, ceil_ns(aw, af), nxt}
end

if op == 'u' then
  -- At most 2*B*T used (or what is, if more); the cost in two parts of
  -- at most B each, so that every product stays exact.
  local capw, capf = add(cw, cf, cw, cf)
  if le(capw, capf, uw, uf) then capw, capf = uw, uf end
  local c1 = math.min(cost, burst)
  local c2 = math.min(cost - c1, burst)
  local nw, nf = add(uw, uf, mul(c1, sw, sf))
  nw, nf = add(nw, nf, mul(c2, sw, sf))
  if le(capw, capf, nw, nf) then nw, nf = capw, capf end
  if cost > 0 then write(nw, nf, ceil_ns(nw, nf)) end
  if le(nw, nf, cw, cf) then return decide(1, nw, nf, 0) end
  return decide(0, nw, nf, ceil_ns(sub(nw, nf, cw, cf)))
end

if cost > burst then return decide(0, uw, uf, -1) end
local kw, kf = mul(cost, sw, sf)
local nw, nf = add(uw, uf, kw, kf)
if le(nw, nf, cw, cf) then
  if cost > 0 then write(nw, nf, ceil_ns(nw, nf)) end
  return decide(1, nw, nf, 0)
end
local ww, wf = sub(nw, nf, cw, cf)
return decide(0, uw, uf, ceil_ns(ww, wf))
