-- Windows (fixed, sliding, log): P < 2^51 ns. A time's position in its
-- aligned window, t mod P, is computed exactly from (s, n): with
-- g = gcd(P, 1e9) and Pg = P/g, s*1e9 = (s mod Pg)*1e9 (mod P).
local P = tonumber(ARGV[8])
local L = tonumber(ARGV[9])
local Pg = tonumber(ARGV[10])
local NS_MOD_P = fmod(1e9, P)

-- a * b mod m, exact for a, b < m < 2^52.
local function mulmod(a, b, m)
  local p = a * b
  if p < TWO53 then return fmod(p, m) end
  local r = 0
  while b > 0 do
    local bit = fmod(b, 2)
    if bit == 1 then r = fmod(r + a, m) end
    a = fmod(a + a, m)
    b = (b - bit) / 2
  end
  return r
end

-- (ts, tn) mod p, with pg = p / gcd(p, 1e9).
local function time_mod_p(ts, tn, p, pg)
  return fmod(mulmod(fmod(ts, pg), fmod(1e9, p), p) + tn, p)
end

-- (ts, tn) mod P.
local function time_mod(ts, tn)
  return fmod(mulmod(fmod(ts, Pg), NS_MOD_P, P) + tn, P)
end
