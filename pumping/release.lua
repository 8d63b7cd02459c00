-- Takes back a send decide.lua counted but that was never texted (the
-- windows refused it, another group's rule did, or the provider sent
-- nothing).
--
-- KEYS     as decide.lua's call, the same group
-- ARGV[1]  the bucket decide.lua counted in
-- ARGV[2]  the phone (E.164)
-- ARGV[3]  1 when decide.lua counted the phone anew (its record goes too),
--          2 when it counted a resend past the free ones again (the country
--          gives it back, the record keeps its first count), 3 for the
--          caller's networks of a free resend: their budgets only
-- ARGV[4]  1 when KEYS[1] is the phone's record
-- ARGV[5]  number of subjects; then per subject: kind ("N" a network with
--          its country ledger: two keys), amount (the price
--          for "m"; for "c" what decide.lua counted anew, bits: 1 the
--          country, 2 its challenge ledger, 4 its foreign networks' ledger;
--          else ignored)
-- The fields are named in F (pumping/fields.go).
local x, new, again = ARGV[1], ARGV[3] == '1', ARGV[3] == '2'
local n = tonumber(ARGV[5])
local rec = nil
if ARGV[4] == '1' then rec = KEYS[1] end

-- takeBack gives a subject back amount texts of bucket x: only a bucket
-- still in the window holds the count to take back.
local function takeBack(k, amount)
  if redis.call('HEXISTS', k, F.textsIn .. x) == 1 then
    redis.call('HINCRBY', k, F.textsIn .. x, -amount)
    redis.call('HINCRBY', k, F.texts, -amount)
  end
end

-- releaseSigned gives an operator or a country back what decide.lua
-- counted anew (amount's bits: 1 the subject counted the phone, 2 its
-- challenge ledger did, 4 its ledger of foreign networks did), and takes
-- the marks off the record of a number counted before; the returning
-- block is an approval's, nothing to take back.
local function releaseSigned(key, ch, fo, amount)
  local country, challenge, foreign = amount % 2 == 1, math.floor(amount / 2) % 2 == 1, amount >= 4
  local keys = {}
  if country then keys[#keys + 1] = key end
  if challenge then keys[#keys + 1] = ch end
  if foreign then keys[#keys + 1] = fo end
  if rec ~= nil and not new and not again then
    if country then redis.call('HDEL', rec, F.recCountry) end
    if challenge then redis.call('HDEL', rec, F.recChallenge) end
    if foreign then redis.call('HDEL', rec, F.recForeign) end
  end
  for _, k in ipairs(keys) do takeBack(k, 1) end
end

-- releaseCounted gives a range, a network (and its ledger of texts to the
-- country, sub) or the spend ledger back its count. A range counted the
-- phone only when anew. A free resend (a record, counted before: ARGV[3]
-- 0) counted neither its ranges nor, in the same call, the caller's
-- networks' budgets, only their ledgers to the country; ARGV[3] 3 gives a
-- free resend's networks back their budgets alone (Guard.conclude).
local function releaseCounted(kind, key, sub, amount)
  if kind == 'r' and not new then return end
  if kind ~= 'm' then amount = 1 end
  local keys = {key, sub}
  if kind == 'n' or kind == 'N' then
    if rec ~= nil and ARGV[3] == '0' then
      keys = {sub}
    elseif ARGV[3] == '3' then
      keys = {key}
    end
  end
  for _, k in ipairs(keys) do takeBack(k, amount) end
end

local ki, ai = 1, 6
if rec ~= nil then ki = 2 end
for i = 1, n do
  local kind, amount = ARGV[ai], tonumber(ARGV[ai + 1]) or 1
  local key = KEYS[ki]
  ai, ki = ai + 2, ki + 1
  if kind == 'c' then
    releaseSigned(key, KEYS[ki], KEYS[ki + 2], amount)
    ki = ki + 3
  else
    local sub = nil
    if kind == 'N' then
      sub = KEYS[ki]
      ki = ki + 1
    end
    releaseCounted(kind, key, sub, amount)
  end
end
if rec ~= nil and new then
  redis.call('DEL', rec)
elseif rec ~= nil then
  -- Not texted: not one of the number's resends either.
  local t = tonumber(redis.call('HGET', rec, F.recResends))
  if t ~= nil and t > 0 then redis.call('HSET', rec, F.recResends, t - 1) end
end
return 1
