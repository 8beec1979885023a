-- wrk script for benches/fleet/pair.sh: GET /api/items from one client IP
-- (MODE=same: the limited path, one client flooding) or from a new client
-- IP per request, cycled over 2^22 (MODE=distinct: the admitted path, many
-- clients under their limits). The client IP goes in X-Forwarded-For, the
-- benchmark being the trusted proxy.
local mode = os.getenv("MODE") or "same"
local counter = 0

function setup(thread)
  thread:set("id", math.random(0, 4194303))
end

function init(args)
  counter = id
end

function request()
  local ip = "203.0.113.7"
  if mode == "distinct" then
    local n = counter % 4194304
    counter = counter + 1
    ip = string.format("10.%d.%d.%d", math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
  end
  return wrk.format("GET", "/api/items", { ["X-Forwarded-For"] = ip })
end
