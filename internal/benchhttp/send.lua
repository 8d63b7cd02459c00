-- wrk script for POST /v1/otp/send (and the baselines, which take the same
-- requests). Arguments: path, mode, and a base that keeps each round's
-- numbers apart. Modes: "fresh": a new valid US number from a new client
-- address every request; "hot": one number from one address; and the flood
-- shapes of BenchmarkFlood, "bad-numbers": a number that cannot parse from a
-- new address every request, "pumped-block": a number of one Latvian block
-- of 100 (+371200000NN) from a new address every request. "verify" (path
-- /v1/otp/verify) takes two more arguments, a file of "phone code" lines
-- (texts the fake provider sent) and wrk's thread count: thread t takes
-- lines t, t + count, ...; each request verifies the next of its lines'
-- codes, from a new address; a thread out of lines stops (its last request
-- a GET /healthz, so no verify of a used code is counted).
local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

local areas = {"206", "212", "213", "310", "312", "415", "617", "702", "718", "646"}

function init(args)
  path, mode, base, codes_file, nthreads = args[1], args[2], tonumber(args[3]), args[4], tonumber(args[5])
  n = 0
  codes = {}
end

local pairs_

-- verify is the request verifying this thread's n-th line of the codes file.
local function verify(ip)
  if not pairs_ then
    pairs_ = {}
    local k = 0
    for line in io.lines(codes_file) do
      if k % nthreads == tid then
        table.insert(pairs_, line)
      end
      k = k + 1
    end
  end
  local line = pairs_[n]
  if not line then
    wrk.thread:stop()
    return wrk.format("GET", "/healthz")
  end
  local phone, code = line:match("^(%S+) (%S+)$")
  local headers = {["Content-Type"] = "application/json", ["X-Forwarded-For"] = ip}
  return wrk.format("POST", path, headers, '{"phone":"' .. phone .. '","code":"' .. code .. '"}')
end

function request()
  n = n + 1
  local i = base + tid * 1000000 + n
  local phone, ip
  local fresh = string.format("10.%d.%d.%d", math.floor(i / 65536) % 256, math.floor(i / 256) % 256, i % 256)
  if mode == "fresh" then
    local area = areas[math.floor(i / 8000000) % 10 + 1]
    phone = string.format("+1%s%03d%04d", area, 200 + math.floor(i / 10000) % 800, i % 10000)
    ip = fresh
  elseif mode == "verify" then
    return verify(fresh)
  elseif mode == "bad-numbers" then
    phone, ip = "+1000", fresh
  elseif mode == "pumped-block" then
    phone, ip = string.format("+371200000%02d", i % 100), fresh
  else
    phone = string.format("+1650253%04d", base % 10000)
    ip = string.format("192.0.2.%d", base % 250 + 1)
  end
  local headers = {["Content-Type"] = "application/json", ["X-Forwarded-For"] = ip}
  return wrk.format("POST", path, headers, '{"phone":"' .. phone .. '"}')
end

function response(status)
  codes[status] = (codes[status] or 0) + 1
end

function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    for status, count in pairs(t:get("codes")) do
      io.write(string.format("status %d %d\n", status, count))
    end
  end
  io.write(string.format("p50 %d\np99 %d\n", latency:percentile(50), latency:percentile(99)))
end
