-- Counts an approved code for one country in its current bucket.
--
-- KEYS[1]  the country's counts (see sent.lua)
-- ARGV[1]  now in ms, or "" for Redis TIME (only tests pass a clock)
-- ARGV[2]  bucket_ms
-- ARGV[3]  window_ms
-- ARGV[4]  how many approvals to count
--
-- sent.lua drops the buckets that left the window; this drops them too once
-- the hash holds more than a window's worth, so a country that only ever
-- approves cannot grow its hash without bound. Returns 1.
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(ARGV[1])
end
local bucket, window = tonumber(ARGV[2]), tonumber(ARGV[3])
local cur = math.floor(now / bucket)
local n = math.ceil(window / bucket)

redis.call('HINCRBY', KEYS[1], 'a' .. cur, tonumber(ARGV[4]))
redis.call('PEXPIRE', KEYS[1], 2 * window)

if redis.call('HLEN', KEYS[1]) > 2 * n then
  local oldest = cur - n + 1
  for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
    if tonumber(string.sub(f, 2)) < oldest then
      redis.call('HDEL', KEYS[1], f)
    end
  end
end
return 1
