-- Reads every window of every subject, writing nothing: the support desk's
-- view. The protocol is documented in status.go: KEYS and ARGV as for
-- allow.lua (allowArgs; ticket and lease unused, KEYS only the subject
-- sets); the reply {now, used, reset_us, used, reset_us, ...} is read by
-- parseStatusReply.
local now = clock(1000000) -- the prelude's (internal/luascript)
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
