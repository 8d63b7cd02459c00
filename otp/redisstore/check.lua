-- Compares a guess with the pending code, counts and consumes, atomically:
-- racing guesses are decided one at a time, so no more than max_attempts
-- wrong guesses are ever answered.
-- KEYS[1] the phone's code hash; ARGV[1] the guess's MAC; ARGV[2] max_attempts
-- Returns {status, attempts_left}: status 0 nothing pending, 1 approved (the
-- code is gone), 2 wrong (the code is gone when attempts_left is 0).
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
