-- Claims an idempotency scope for a request, or reports who has it.
-- KEYS[1] the scope's key; ARGV[1] the claiming request's ticket; ARGV[2]
-- how long the claim (and later the answer) is kept, in milliseconds.
-- Returns {1, ""} claimed; {2, ""} another request holds the claim;
-- {3, answer} the scope has its answer.
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], 'claim:' .. ARGV[1], 'PX', ARGV[2])
  return {1, ''}
end
if string.sub(v, 1, 6) == 'claim:' then
  return {2, ''}
end
return {3, v}
