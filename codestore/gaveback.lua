-- A duplicate in flight gave back what it counted elsewhere: one fewer in
-- the scope's count (claim.lua's KEYS[2]). Protocol in duplicates.go:
-- KEYS[1] the count's key. Returns the count left.
local n = redis.call('DECR', KEYS[1])
if n <= 0 then
  redis.call('DEL', KEYS[1])
end
return n
