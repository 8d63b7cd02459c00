-- Compares a guess with the pending code, counts and consumes, atomically:
-- racing guesses are decided one at a time, so no more than max_attempts
-- wrong guesses are ever answered. Protocol in check.go (checkArgs,
-- parseCheckReply): KEYS[1] the phone's code hash; ARGV mac, max_attempts;
-- returns {status, attempts_left}, status 0 none, 1 approved, 2 wrong.
local mac = redis.call('HGET', KEYS[1], 'm')
if not mac then
  return {0, 0}
end
if mac == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {1, 0}
end
local left = tonumber(ARGV[2]) - redis.call('HINCRBY', KEYS[1], 'a', 1)
if left <= 0 then
  redis.call('DEL', KEYS[1])
  return {2, 0}
end
return {2, left}
