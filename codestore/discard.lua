-- Deletes the pending code only if it is still the one with this MAC: a code
-- issued meanwhile by another request stays. Protocol in discard.go:
-- KEYS[1] the phone's code hash; ARGV mac.
if redis.call('HGET', KEYS[1], 'm') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
