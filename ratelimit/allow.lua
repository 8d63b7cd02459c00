-- Decides one request for every window of every subject, atomically.
--
-- The protocol (KEYS, ARGV positions, the reply) is documented once, in
-- allow.go: allowArgs builds ARGV, parseAllowReply reads the reply
-- {allowed, now, tight, used, reset_us, pending, contention}, or only now
-- when every window was empty (admitted). In short:
-- KEYS are the subjects' sorted sets (then, with a lease, their pending
-- sets); ARGV is now|"", ticket, lease_us, then per subject its keys' time
-- to live in ms and its windows, "longest_us window_us max window_us max
-- ...". An entry exactly window_us old is outside its window: with integer
-- scores, entry t is inside iff t >= now - window_us + 1.
--
-- Every argument costs Redis a Lua string in ARGV, and a Lua number given to
-- redis.call is formatted with %.17g (exact for integers below 2^53:
-- microsecond timestamps are about 2^51), a few thousand instructions each.
-- So a fresh subject, the common case, costs one ZCARD and reads none of its
-- windows, and what it records goes to Redis as strings: now as TIME gave it,
-- the time to live as the caller wrote it.
local nowS = ARGV[1] -- the prelude's clock(), as the string ZADD takes
if nowS == '' then
  local t = redis.call('TIME')
  nowS = t[1] .. ('000000'):sub(#t[2] + 1) .. t[2]
end
local now = tonumber(nowS)
local nsub = (#ARGV - 3) / 2
local lease = 0
if #KEYS > nsub then
  lease = tonumber(ARGV[3])
  -- Reservations nobody committed in time are taken back first.
  for i = 1, nsub do
    local stale = redis.call('ZRANGEBYSCORE', KEYS[nsub + i], '-inf', now - lease)
    if #stale > 0 then
      redis.call('ZREM', KEYS[i], unpack(stale))
      redis.call('ZREM', KEYS[nsub + i], unpack(stale))
    end
  end
end

-- windows(i) is subject i's {longest_us, window_us, max, ...}, read once.
local specs = {}
local function windows(i)
  local s = specs[i]
  if s == nil then
    s = {}
    for n in string.gmatch(ARGV[3 + 2 * i], '%d+') do s[#s + 1] = tonumber(n) end
    specs[i] = s
  end
  return s
end

-- Trim every subject to its longest window; most subjects are fresh (empty).
local sizes, fresh = {}, true
for i = 1, nsub do
  local size = redis.call('ZCARD', KEYS[i])
  if size > 0 then
    size = size - redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - windows(i)[1])
    if size > 0 then fresh = false end
  end
  sizes[i] = size
end

local function record()
  for i = 1, nsub do
    local ttl = ARGV[2 + 2 * i]
    redis.call('ZADD', KEYS[i], nowS, ARGV[2])
    redis.call('PEXPIRE', KEYS[i], ttl)
    if lease > 0 then
      redis.call('ZADD', KEYS[nsub + i], nowS, ARGV[2])
      redis.call('PEXPIRE', KEYS[nsub + i], ttl)
    end
  end
end

if fresh then
  record()
  return now -- {1, now, 0, 1, 0, 0, 0}, in short (allow.go)
end

-- One entry per window, over all subjects, in argument order.
local wsub, wlen, wmax, wused = {}, {}, {}, {}
local nw = 0
for i = 1, nsub do
  local s, size = windows(i), sizes[i]
  for j = 2, #s, 2 do
    local w = s[j]
    nw = nw + 1
    wsub[nw], wlen[nw], wmax[nw] = i, w, s[j + 1]
    if size == 0 or w == s[1] then
      wused[nw] = size -- the longest window holds the whole trimmed set
    else
      wused[nw] = redis.call('ZCOUNT', KEYS[i], now - w + 1, '+inf')
    end
  end
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
