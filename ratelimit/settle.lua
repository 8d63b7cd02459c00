-- Settles a reservation made by allow.lua with a lease, on one slot.
-- KEYS     the subjects' sorted sets, then their pending sets (as allow.lua)
-- ARGV[1]  the ticket; ARGV[2] "commit" (it stays counted for good) or
--          "release" (it is taken back)
-- Returns how many subjects still held the reservation: on commit, fewer
-- than all means a lease ran out and the decision must not stand.
local n = #KEYS / 2
local held = 0
for i = 1, n do
  held = held + redis.call('ZREM', KEYS[n + i], ARGV[1])
  if ARGV[2] == 'release' then
    redis.call('ZREM', KEYS[i], ARGV[1])
  end
end
return held
