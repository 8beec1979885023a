-- Windows (fixed, sliding, log): P < 2^51 ns. A time's position in its
-- aligned window, t mod P, is computed exactly from (s, n): with
-- g = gcd(P, 1e9) and Pg = P/g, s*1e9 = (s mod Pg)*1e9 (mod P).
local P = tonumber(ARGV[8])
local L = tonumber(ARGV[9])
local Pg = tonumber(ARGV[10])
local NS_MOD_P = fmod(1e9, P)

-- (ts, tn) mod P.
local function time_mod(ts, tn)
  return fmod(mulmod(fmod(ts, Pg), NS_MOD_P, P) + tn, P)
end
