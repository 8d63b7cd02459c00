-- Decides one request for every window of every subject, atomically.
--
-- The protocol (KEYS, ARGV positions, the reply) is documented once, in
-- allow.go: allowArgs builds ARGV, parseAllowReply reads the reply
-- {allowed, now, tight, used, reset_us, pending, contention}. In short:
-- KEYS are the subjects' sorted sets (then, with a lease, their pending
-- sets); ARGV is now|"", ticket, lease_us, then per subject n, the longest
-- window_us and n (window_us, max) pairs. An entry exactly window_us old is
-- outside its window: with integer scores, entry t is inside iff
-- t >= now - window_us + 1.
--
-- Numbers go to redis.call as Lua numbers, never through tostring: Redis
-- formats them with %.17g, exact for integers below 2^53 (microsecond
-- timestamps are about 2^51). Fresh subjects, the common case, cost one ZCARD.
local now = clock(1000000) -- the prelude's (internal/luascript)
local lease = tonumber(ARGV[3])
local nsub = #KEYS
if lease > 0 then
  nsub = nsub / 2
  -- Reservations nobody committed in time are taken back first.
  for i = 1, nsub do
    local stale = redis.call('ZRANGEBYSCORE', KEYS[nsub + i], '-inf', now - lease)
    if #stale > 0 then
      redis.call('ZREM', KEYS[i], unpack(stale))
      redis.call('ZREM', KEYS[nsub + i], unpack(stale))
    end
  end
end

-- Trim every subject to its longest window; most subjects are fresh (empty).
local sizes, fresh = {}, true
local pos = 4
for i = 1, nsub do
  local size = redis.call('ZCARD', KEYS[i])
  if size > 0 then
    size = size - redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - tonumber(ARGV[pos + 1]))
    if size > 0 then fresh = false end
  end
  sizes[i] = size
  pos = pos + 2 + 2 * tonumber(ARGV[pos])
end

local function record()
  local p = 4
  for i = 1, nsub do
    local ttl = math.ceil(tonumber(ARGV[p + 1]) / 1000)
    redis.call('ZADD', KEYS[i], now, ARGV[2])
    redis.call('PEXPIRE', KEYS[i], ttl)
    if lease > 0 then
      redis.call('ZADD', KEYS[nsub + i], now, ARGV[2])
      redis.call('PEXPIRE', KEYS[nsub + i], ttl)
    end
    p = p + 2 + 2 * tonumber(ARGV[p])
  end
end

if fresh then
  record()
  return {1, now, 0, 1, 0, 0, 0}
end

-- One entry per window, over all subjects, in argument order.
local wsub, wlen, wmax, wused = {}, {}, {}, {}
local nw = 0
pos = 4
for i = 1, nsub do
  local n, long, size = tonumber(ARGV[pos]), tonumber(ARGV[pos + 1]), sizes[i]
  for j = pos + 2, pos + 2 * n, 2 do
    local w = tonumber(ARGV[j])
    nw = nw + 1
    wsub[nw], wlen[nw], wmax[nw] = i, w, tonumber(ARGV[j + 1])
    if size == 0 or w == long then
      wused[nw] = size -- the longest window holds the whole trimmed set
    else
      wused[nw] = redis.call('ZCOUNT', KEYS[i], now - w + 1, '+inf')
    end
  end
  pos = pos + 2 + 2 * n
end

-- Refused: wait for the latest of the full windows to make room.
local tight, wait, pending, contention = 0, 0, 0, 1
for k = 1, nw do
  if wused[k] >= wmax[k] then
    -- Room appears when used - max + 1 of the window's oldest entries leave.
    local e = redis.call('ZRANGEBYSCORE', KEYS[wsub[k]], now - wlen[k] + 1, '+inf', 'WITHSCORES', 'LIMIT', wused[k] - wmax[k], 1)
    local w = tonumber(e[2]) + wlen[k] - now
    if w > wait then tight, wait = k, w end
    local p = 0
    if lease > 0 then
      p = redis.call('ZCOUNT', KEYS[nsub + wsub[k]], now - wlen[k] + 1, '+inf')
    end
    pending = pending + p
    if wused[k] - p >= wmax[k] then contention = 0 end
  end
end
if tight > 0 then
  if pending == 0 then contention = 0 end
  return {0, now, tight, wused[tight], wait, pending, contention}
end

-- Admitted: record everywhere, then report the window with the least room.
record()
local least
for k = 1, nw do
  local room = wmax[k] - wused[k] - 1
  -- Ties go to the longer window: its quota comes back later.
  if least == nil or room < least or (room == least and wlen[k] > wlen[tight]) then
    least, tight = room, k
  end
end
local reset = wlen[tight] -- this request is the window's only entry
if wused[tight] > 0 then
  local e = redis.call('ZRANGEBYSCORE', KEYS[wsub[tight]], now - wlen[tight] + 1, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  reset = tonumber(e[2]) + wlen[tight] - now
end
return {1, now, tight, wused[tight] + 1, reset, 0, 0}
