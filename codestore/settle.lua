-- Settles a claim: stores the answer (ARGV[2] non-empty, kept ARGV[3] ms) or
-- gives the claim up (ARGV[2] empty), only while ARGV[1]'s claim holds.
-- Protocol in settle.go (settleArgs).
if redis.call('GET', KEYS[1]) ~= 'claim:' .. ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  return redis.call('DEL', KEYS[1])
end
redis.call('SET', KEYS[1], 'done:' .. ARGV[2], 'PX', ARGV[3])
return 1
