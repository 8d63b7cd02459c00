-- Stores a new pending code unless one is pending, atomically. Protocol in
-- issue.go (issueArgs, parseIssueReply): KEYS[1] the phone's code hash
-- (m = MAC, s = sealed code, a = wrong attempts); ARGV mac, sealed, ttl_ms.
-- Returns the pending code's sealed form (its expiry renewed, its attempts
-- kept), or false when the new code was stored.
local sealed = redis.call('HGET', KEYS[1], 's')
if sealed then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return sealed
end
redis.call('HSET', KEYS[1], 'm', ARGV[1], 's', ARGV[2], 'a', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return false
