-- Credits an approved code to the subjects its text was counted in, once,
-- and records the number as a returning user.
--
-- KEYS     the group's keys: for the destination group, the phone's record,
--          its ranges, then per subject that takes signs (its operator, its
--          country: as many as ARGV[6] says) its hash, its challenge ledger
--          and its ledger of foreign networks, and last the phone's
--          returning block; for the caller group, its networks and the
--          country ledgers of its signal levels (see decide.lua)
-- ARGV[1]  now in ms, or "" for Redis TIME
-- ARGV[2]  bucket_ms
-- ARGV[3]  nb: buckets in the window
-- ARGV[4]  the phone (E.164)
-- ARGV[5]  "d" for the destination group, "n" for the caller group
-- ARGV[6]  "tail ms signed": the phone's field in its returning block,
--          how long the block keeps it (0: no returning record), and how
--          many subjects that take signs the keys hold (0 to 2)
--
-- An approval counts in the current bucket. The country (and its operator,
-- which counts alike) is credited only when the phone's text was counted in
-- it (it carried no sign of a real user, F.recCountry), its challenge
-- ledger when the text passed with a solved challenge (F.recChallenge), its
-- ledger of foreign networks when the text came from a network known abroad
-- (F.recForeign). The fields are named in F (pumping/fields.go).
-- Returns {credited, network id}: credited 0 when the phone has no record
-- of a counted text or was already approved and texted nothing since (the
-- caller group is then not credited either).
local now = clock(1000) -- the prelude's (internal/luascript)
local bucket, nb = tonumber(ARGV[2]), tonumber(ARGV[3])
local cur = math.floor(now / bucket)
local day = math.floor(cur / nb)
local oldest = cur - nb + 1
local learned = 15 * bucket * nb

-- credit counts one approval in a subject: one read, one write, and a new
-- expiry when the key would keep its learned baseline less than `learned`
-- less a bucket. F.expires, the key's expiry as this script and decide.lua
-- last set it, spares a PTTL call (see decide.lua).
local function credit(key)
  local fa, fd = F.approvedIn .. cur, F.approvedOn .. day
  local b, a, A, d, expires = unpack(redis.call('HMGET', key, F.oldest, fa, F.approved, fd, F.expires))
  local f = {fa, (tonumber(a) or 0) + 1, F.approved, (tonumber(A) or 0) + 1, fd, (tonumber(d) or 0) + 1}
  if b == false then f[#f + 1], f[#f + 2] = F.oldest, oldest end
  local x = tonumber(expires)
  if x == nil then
    local ttl = redis.call('PTTL', key)
    if ttl > 0 then x = now + ttl end
  end
  local refresh = x == nil or x - now < learned - bucket
  if refresh then x = now + learned end
  if x ~= tonumber(expires) then f[#f + 1], f[#f + 2] = F.expires, x end
  redis.call('HSET', key, unpack(f))
  if refresh then redis.call('PEXPIRE', key, learned) end
end

-- creditDestination credits the destination group: the returning block,
-- then, once per counted text, the ranges and what the subjects that take
-- signs counted (the record says which).
local function creditDestination()
  local tail, keepms, signed = string.match(ARGV[6], '(%d*) (%d+) (%d)')
  keepms, signed = tonumber(keepms), tonumber(signed)
  local rec, ret = KEYS[1], KEYS[#KEYS]
  if signed > 0 and keepms > 0 and tail ~= '' then
    -- A returning user whatever the record says: the code was approved.
    redis.call('HSET', ret, tail, math.floor(now / 86400000))
    redis.call('PEXPIRE', ret, keepms)
  end
  local h, approved, netid, u, owed, k, f = unpack(redis.call('HMGET', rec, F.recBucket, F.recApproved,
    F.recNetwork, F.recCountry, F.recOwed, F.recChallenge, F.recForeign))
  h = tonumber(h)
  if h == nil or h < oldest then
    return {0, ''}
  end
  -- The number's resends start afresh (decide.lua, F.recResends).
  redis.call('HDEL', rec, F.recResends)
  if approved then
    -- Approved before in this window: the ranges and the country counted the
    -- number once and were credited; a later text's networks were not.
    if owed then
      redis.call('HDEL', rec, F.recOwed)
      return {1, netid or ''}
    end
    return {0, ''}
  end
  redis.call('HSET', rec, F.recApproved, 1)
  local last = #KEYS - 1 - 3 * signed
  for j = last + 1, #KEYS - 3, 3 do
    if u then credit(KEYS[j]) end
    if k then credit(KEYS[j + 1]) end
    if f then credit(KEYS[j + 2]) end
  end
  for i = 2, last do credit(KEYS[i]) end
  return {1, netid or ''}
end

if ARGV[5] == 'n' then
  for i = 1, #KEYS do credit(KEYS[i]) end
  return {1, ''}
end
return creditDestination()
