-- Reads every window of every subject, writing nothing: the support desk's
-- view. The protocol is documented in status.go: KEYS and ARGV as for
-- allow.lua (allowArgs; ticket, lease and the times to live unused, KEYS
-- only the subject sets); the reply {now, used, reset_us, used, reset_us,
-- ...} is read by parseStatusReply.
local now = clock(1000000) -- the prelude's (internal/luascript)
local out = {now}
for i = 1, #KEYS do
  -- "longest_us window_us max window_us max ...", as allow.lua reads it.
  local s = {}
  for n in string.gmatch(ARGV[3 + 2 * i], '%d+') do s[#s + 1] = tonumber(n) end
  for j = 2, #s, 2 do
    local w, max = s[j], s[j + 1]
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
end
return out
