-- Decides one request for every window of every subject, atomically.
--
-- KEYS[i]  one sorted set per subject: members are request tickets, scores
--          the microsecond (Redis TIME) at which each request was admitted.
-- ARGV[1]  now in microseconds, or "" for Redis TIME (only tests pass a clock)
-- ARGV[2]  the request's ticket, recorded in every subject when admitted
-- ARGV[3]  then per subject: n, followed by n pairs (window_us, max)
--
-- An entry exactly window_us old is outside its window. The request is
-- admitted only when every window holds fewer than max entries; a refused
-- request writes nothing.
--
-- Returns {allowed, now, tight, used, reset_us}: tight is the 1-based index,
-- over all windows in argument order, of the window that bounds the request
-- most; used its count (this request included when admitted); reset_us, when
-- refused, the exact wait until the request would fit (max over the full
-- windows), else the wait until the tight window's oldest entry leaves.
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end

local function us(n) return string.format('%.0f', n) end

local wins = {} -- {key, window_us, max, used, since}
local longest = {} -- per subject
local pos = 3
for i = 1, #KEYS do
  local key = KEYS[i]
  local n = tonumber(ARGV[pos])
  pos = pos + 1
  longest[i] = 0
  local first = #wins + 1
  for _ = 1, n do
    local w = tonumber(ARGV[pos])
    wins[#wins + 1] = {key, w, tonumber(ARGV[pos + 1]), 0, '(' .. us(now - w)}
    if w > longest[i] then longest[i] = w end
    pos = pos + 2
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', us(now - longest[i]))
  for k = first, #wins do
    local win = wins[k]
    win[4] = redis.call('ZCOUNT', key, win[5], '+inf')
  end
end

-- Refused: wait for the latest of the full windows to make room.
local tight, wait = 0, 0
for k = 1, #wins do
  local win = wins[k]
  if win[4] >= win[3] then
    -- Room appears when used - max + 1 of the window's oldest entries leave.
    local e = redis.call('ZRANGEBYSCORE', win[1], win[5], '+inf', 'WITHSCORES', 'LIMIT', win[4] - win[3], 1)
    local w = tonumber(e[2]) + win[2] - now
    if w > wait then tight, wait = k, w end
  end
end
if tight > 0 then
  return {0, now, tight, wins[tight][4], wait}
end

-- Admitted: record everywhere, then report the window with the least room.
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], us(now), ARGV[2])
  redis.call('PEXPIRE', KEYS[i], math.ceil(longest[i] / 1000))
end
local least
for k = 1, #wins do
  local win = wins[k]
  win[4] = win[4] + 1
  local room = win[3] - win[4]
  -- Ties go to the longer window: its quota comes back later.
  if least == nil or room < least or (room == least and win[2] > wins[tight][2]) then
    least, tight = room, k
  end
end
local win = wins[tight]
local e = redis.call('ZRANGEBYSCORE', win[1], win[5], '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
return {1, now, tight, win[4], tonumber(e[2]) + win[2] - now}
