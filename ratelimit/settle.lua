-- Settles a reservation made by allow.lua with a lease, on one slot. The
-- protocol is documented in settle.go: KEYS the subjects' sorted sets, then
-- their pending sets; ARGV ticket, "commit" | "release" (settleMode). Returns
-- how many subjects still held the reservation (parseSettleReply).
local n = #KEYS / 2
local held = 0
for i = 1, n do
  held = held + redis.call('ZREM', KEYS[n + i], ARGV[1])
  if ARGV[2] == 'release' then
    redis.call('ZREM', KEYS[i], ARGV[1])
  end
end
return held
