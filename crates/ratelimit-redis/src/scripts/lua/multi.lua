-- ratelimit-redis: several limits of one key in one script, all or
-- nothing. Preceded by the generated table `lim`: lim[i](KEYS, ARGV) runs
-- limit i's own script (common.lua and its algorithm) on its own key and
-- arguments, and returns its reply {allowed, remaining, wait, reset, next}
-- (a refund: four numbers).
--
-- KEYS[i]   limit i's key; every key has the caller's key as its hash tag,
--           so they share one Cluster slot
-- ARGV[1..7] as in common.lua, shared by every limit
-- then, per limit: the number of its parameters, and its parameters
--
-- A check runs the limits in order and stops at the first that denies; if
-- one does, the keys of the limits that admitted before it are put back
-- exactly as they were (DUMP before, RESTORE after, TTL included), so a
-- denied request consumes nothing. The reply is the replies of the limits
-- run, five numbers each, in order. A refund runs every limit's refund; a
-- settlement ('u', 'd') settles every limit and replies all their replies.
local m = #KEYS
local args, pos = {}, 8
for i = 1, m do
  local a = {}
  for j = 1, 7 do a[j] = ARGV[j] end
  local count = tonumber(ARGV[pos])
  for j = 1, count do a[7 + j] = ARGV[pos + j] end
  pos = pos + count + 1
  args[i] = a
end

if ARGV[1] == 'r' then
  for i = 1, m do lim[i]({KEYS[i]}, args[i]) end
  return {0, 0, 0, 0}
end

-- A settlement settles every limit: the replies of all, in order.
if ARGV[1] == 'u' or ARGV[1] == 'd' then
  local out = {}
  for i = 1, m do
    local r = lim[i]({KEYS[i]}, args[i])
    for j = 1, 5 do out[#out + 1] = r[j] end
  end
  return out
end

local out, saved = {}, {}
for i = 1, m do
  if i < m then
    saved[i] = {redis.call('DUMP', KEYS[i]), redis.call('PTTL', KEYS[i])}
  end
  local r = lim[i]({KEYS[i]}, args[i])
  for j = 1, 5 do out[#out + 1] = r[j] end
  if r[1] ~= 1 then
    for j = i - 1, 1, -1 do
      local k, dump, ttl = KEYS[j], saved[j][1], saved[j][2]
      if dump then
        -- PTTL: -1 no expiry (RESTORE's 0); 0 about to expire.
        if ttl == -1 then ttl = 0 elseif ttl < 1 then ttl = 1 end
        redis.call('RESTORE', k, ttl, dump, 'REPLACE')
      else
        redis.call('DEL', k)
      end
    end
    return out
  end
end
return out
