-- Reads every window of every subject, writing nothing: the support desk's
-- view. KEYS and ARGV are laid out as for allow.lua (ARGV[2] and ARGV[3] are
-- unused; KEYS holds only the subject sets).
--
-- Returns {now, used, reset_us, used, reset_us, ...}, one pair per window in
-- argument order: reset_us is how long until the window gives back quota:
-- until one more request would fit when it is full, until its oldest entry
-- leaves otherwise, 0 when it is empty.
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(ARGV[1])
end
local out = {now}
local pos = 4
for i = 1, #KEYS do
  local n = tonumber(ARGV[pos])
  for j = pos + 2, pos + 2 * n, 2 do
    local w, max = tonumber(ARGV[j]), tonumber(ARGV[j + 1])
    local since = now - w + 1
    local used = redis.call('ZCOUNT', KEYS[i], since, '+inf')
    local reset = 0
    if used > 0 then
      local at = 0
      if used >= max then at = used - max end
      local e = redis.call('ZRANGEBYSCORE', KEYS[i], since, '+inf', 'WITHSCORES', 'LIMIT', at, 1)
      reset = tonumber(e[2]) + w - now
    end
    out[#out + 1] = used
    out[#out + 1] = reset
  end
  pos = pos + 2 + 2 * n
end
return out
