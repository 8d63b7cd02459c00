-- Deletes the pending code only while it is still one verification's: its
-- sealed form (field s) starts with that verification's prefix, so a code
-- used up or replaced by a newer verification meanwhile stays as it is.
-- Protocol in withdraw.go: KEYS[1] the phone's code hash; ARGV prefix.
-- Returns 1 deleted, 0 not.
local sealed = redis.call('HGET', KEYS[1], 's')
if sealed and string.sub(sealed, 1, #ARGV[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
