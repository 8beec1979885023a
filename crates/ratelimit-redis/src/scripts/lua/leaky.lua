-- Leaky bucket as a queue: state D, the last admitted departure;
-- d = D - t is kept in [-T, Q*T].
--
-- ARGV[1..7] as in common.lua; then, the fields of `LeakyArgs` (src/args.rs)
-- in order (a test compares the two lists):
-- ARGV[8]   scale: time unit: 1/scale ns, T = P/L in those units
-- ARGV[9]   step_w: T, whole part
-- ARGV[10]  step_f: T, remainder below scale
-- ARGV[11]  queue_w: Q*T, whole part
-- ARGV[12]  queue_f: Q*T, remainder
-- ARGV[13]  queue: Q, the queue length
-- ARGV[14]  stamp: live settings 'l:numbers' (live stores only)
local qw, qf = tonumber(ARGV[11]), tonumber(ARGV[12])  -- Q*T
local queue = tonumber(ARGV[13])
local mw, mf = 0, 0                                     -- -T
if sf > 0 then mw, mf = -sw - 1, sc - sf else mw, mf = -sw, 0 end

-- Carry-over from other settings (old: sw, sf, qw, qf): the next free
-- slot from now, d + T_o (past (Q_o + 1) * T_o if it was over; 0 when
-- behind), rescaled (past (Q + 1) * T if so: the overshoot is kept).
local function carry(dw, df, o, old)
  local xw, xf = add_o(dw, df, old[1], old[2], o)
  if xw < 0 then return nil end
  local uw, uf = rescale(xw, xf, o, old[1], old[2])
  if uw == 0 and uf == 0 then return nil end
  local nw, nf = sub(uw, uf, sw, sf)
  return nw, nf, ceil_ns(uw, uf)
end

local dw, df = read_ahead(carry)
if foreign then
  -- A state of another kind: what it used, charged now (d = used - T).
  local uw, uf = mul(foreign, sw, sf)
  dw, df = sub(uw, uf, sw, sf)
  write(dw, df, ceil_ns(uw, uf))
end
local present = dw ~= nil
-- A state behind now - T is empty; one past Q*T (after a live change to
-- a shorter queue) is denied until it drains.
if not present or le(dw, df, mw, mf) then
  dw, df = mw, mf
end

if (op == 'r' or op == 'd') and present then
  local bw, bf = mul(math.min(cost, queue + 1), sw, sf)
  local rw, rf = sub(dw, df, bw, bf)
  if le(rw, rf, mw, mf) then
    redis.call('DEL', key)
    dw, df = mw, mf
  else
    local ew, ef = add(rw, rf, sw, sf)
    write(rw, rf, ceil_ns(ew, ef))
    dw, df = rw, rf
  end
end
if op == 'r' then return {0, 0, 0, 0} end
if op == 'd' then op, cost = 'u', 0 end

-- last: the last departure (or d when denied).
local function decide(allowed, lw, lf, wait)
  local ew, ef = add(lw, lf, sw, sf)          -- drained, in [0, (Q+1)*T]
  local fw, ff = add(qw, qf, sw, sf)          -- (Q+1)*T
  local rw, rf = sub(fw, ff, ew, ef)
  -- next: until a request of one starts within Q*T.
  local nxt = 0
  if not le(ew, ef, qw, qf) then nxt = ceil_ns(sub(ew, ef, qw, qf)) end
  return {allowed, per_step(rw, rf), wait, ceil_ns(ew, ef), nxt}
end

if op == 'u' then
  -- No debt: the free slots are filled, up to the queue's end.
  local fill = math.min(cost, decide(1, dw, df, 0)[2])
  if fill > 0 then
    local stw, stf = add(dw, df, sw, sf)
    dw, df = add(stw, stf, mul(fill - 1, sw, sf))
    local ew, ef = add(dw, df, sw, sf)
    write(dw, df, ceil_ns(ew, ef))
  end
  return decide(1, dw, df, 0)
end
if cost == 0 then return decide(1, dw, df, 0) end
if cost - 1 > queue then return decide(0, dw, df, -1) end
local stw, stf = add(dw, df, sw, sf)          -- start = d + T >= 0
local kw, kf = mul(cost - 1, sw, sf)
local lw, lf = add(stw, stf, kw, kf)          -- last = start + (n-1)*T
if le(lw, lf, qw, qf) then
  local ew, ef = add(lw, lf, sw, sf)
  write(lw, lf, ceil_ns(ew, ef))
  return decide(1, lw, lf, ceil_ns(stw, stf))
end
local ww, wf = sub(lw, lf, qw, qf)
return decide(0, dw, df, ceil_ns(ww, wf))
