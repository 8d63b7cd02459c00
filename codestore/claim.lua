-- Claims an idempotency scope for a request, or reports who has it.
-- Protocol in claim.go (claimArgs, parseClaimReply): KEYS[1] the scope's
-- key; ARGV ticket, ttl_ms; returns {1, ""} claimed (again, when this
-- ticket holds it: a try that crossed before being asked in turn), {2, ""}
-- held by another request (counted in KEYS[2] when given: duplicates.go),
-- {3, answer} answered.
local v = redis.call('GET', KEYS[1])
if not v or v == 'claim:' .. ARGV[1] then
  redis.call('SET', KEYS[1], 'claim:' .. ARGV[1], 'PX', ARGV[2])
  return {1, ''}
end
if string.sub(v, 1, 6) == 'claim:' then
  if KEYS[2] then
    redis.call('INCR', KEYS[2])
    redis.call('PEXPIRE', KEYS[2], ARGV[2])
  end
  return {2, ''}
end
return {3, v}
