-- Counts a text sent to one country and decides, in the same atomic step,
-- whether the country trips the guard: two replicas can never both miss it.
--
-- KEYS[1]  the country's counts: a hash of per-bucket counters, "s<bucket>"
--          for texts sent and "a<bucket>" for codes approved, bucket being
--          floor(now_ms / bucket_ms); it expires two windows after a write
-- KEYS[2]  the hold: the quarantine key (enforce) or the shadow marker
--          (shadow), a hash {s = sends, a = approvals} of what tripped it,
--          expiring when the quarantine ends
-- ARGV[1]  now in ms, or "" for Redis TIME (only tests pass a clock)
-- ARGV[2]  bucket_ms
-- ARGV[3]  window_ms, a whole number of buckets
-- ARGV[4]  min_sends
-- ARGV[5]  min approval ratio, exact as Go's shortest formatting
-- ARGV[6]  hold_ms
-- ARGV[7]  how many texts to count (a replica gathers them for a moment)
--
-- The window is its last window_ms / bucket_ms buckets, the current one
-- included. It trips when sends >= min_sends and approvals / sends < ratio:
-- the division of two integers rounds exactly as the ratio's literal does, so
-- a ratio met exactly never trips. Tripping writes the hold and clears the
-- counts, so a country lifted or released starts afresh instead of tripping
-- again on the evidence it has served its time for.
--
-- Returns {state, sends, approvals, hold_ms}: state 0 when not tripped, 1 when
-- tripped now, 2 when already held (hold_ms then its PTTL, -1 if it has none;
-- the send is counted but not evaluated).
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(ARGV[1])
end
local bucket, window = tonumber(ARGV[2]), tonumber(ARGV[3])
local cur = math.floor(now / bucket)
local oldest = cur - math.ceil(window / bucket) + 1

redis.call('HINCRBY', KEYS[1], 's' .. cur, tonumber(ARGV[7]))
redis.call('PEXPIRE', KEYS[1], 2 * window)

local held = redis.call('PTTL', KEYS[2])
if held ~= -2 then
  return {2, 0, 0, held}
end

-- Sum the window and drop the buckets that left it: memory stays O(window).
local sends, approvals, stale = 0, 0, {}
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h, 2 do
  local f = h[i]
  if tonumber(string.sub(f, 2)) < oldest then
    stale[#stale + 1] = f
  elseif string.sub(f, 1, 1) == 's' then
    sends = sends + tonumber(h[i + 1])
  else
    approvals = approvals + tonumber(h[i + 1])
  end
end
if #stale > 0 then
  redis.call('HDEL', KEYS[1], unpack(stale))
end

if sends < tonumber(ARGV[4]) or approvals / sends >= tonumber(ARGV[5]) then
  return {0, sends, approvals, 0}
end
local hold = tonumber(ARGV[6])
redis.call('HSET', KEYS[2], 's', sends, 'a', approvals)
redis.call('PEXPIRE', KEYS[2], hold)
redis.call('DEL', KEYS[1])
return {1, sends, approvals, hold}
