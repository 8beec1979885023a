-- wrk script for the attack benchmark (benches/attack/run.sh).
-- MODE (env): "same" one client IP; "distinct" KEYS distinct client IPs in
-- X-Forwarded-For, cycled; "bearer" KEYS distinct bearer tokens of
-- TOKEN_LEN bytes; PAD bytes of an unrelated header on every request.
local mode = os.getenv("MODE") or "same"
local keys = tonumber(os.getenv("KEYS") or "60000")
local token_len = tonumber(os.getenv("TOKEN_LEN") or "32")
local pad = tonumber(os.getenv("PAD") or "0")
local threads = {}
local counter = 0
local stride = 1

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  counter = id
  stride = tonumber(os.getenv("THREADS") or "1")
end

local padding = pad > 0 and string.rep("p", pad) or nil

local function ip(n)
  return string.format("10.%d.%d.%d", math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
end

function request()
  local headers = { ["Content-Type"] = "application/json" }
  if padding then headers["X-Padding"] = padding end
  local n = counter % keys
  counter = counter + stride
  if mode == "same" then
    headers["X-Forwarded-For"] = "203.0.113.7"
    return wrk.format("POST", "/accounts", headers, "{}")
  elseif mode == "distinct" then
    headers["X-Forwarded-For"] = ip(n)
    return wrk.format("POST", "/accounts", headers, "{}")
  else
    local t = tostring(n)
    t = string.rep("0", token_len - #t) .. t
    headers["Authorization"] = "Bearer " .. t
    headers["X-Forwarded-For"] = "203.0.113.7"
    return wrk.format("POST", "/tickets", headers, "{}")
  end
end
