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
local x, phone, new, again = ARGV[1], ARGV[2], ARGV[3] == '1', ARGV[3] == '2'
local n = tonumber(ARGV[5])
-- takeBack gives a subject back amount texts of bucket x: only a bucket
-- still in the window holds the count to take back.
local function takeBack(k, amount)
  if redis.call('HEXISTS', k, 's' .. x) == 1 then
    redis.call('HINCRBY', k, 's' .. x, -amount)
    redis.call('HINCRBY', k, 'S', -amount)
  end
end
local ki, ai = 1, 6
local rec = nil
if ARGV[4] == '1' then
  rec = KEYS[1]
  ki = 2
end
for i = 1, n do
  local kind, amount = ARGV[ai], tonumber(ARGV[ai + 1]) or 1
  ai = ai + 2
  local key = KEYS[ki]
  ki = ki + 1
  local take = kind ~= 'r' or new
  local sub = nil
  if kind == 'N' then
    sub = KEYS[ki]
    ki = ki + 1
  end
  if kind == 'c' then
    -- amount: what decide.lua counted anew, bits: 1 the country counted
    -- the phone, 2 its challenge ledger did, 4 its ledger of foreign
    -- networks did; the returning block is an approval's, nothing to take
    -- back.
    local ch, fo = KEYS[ki], KEYS[ki + 2]
    ki = ki + 3
    local keys = {}
    if amount % 2 == 1 then keys[#keys + 1] = key end
    if math.floor(amount / 2) % 2 == 1 then keys[#keys + 1] = ch end
    if amount >= 4 then keys[#keys + 1] = fo end
    if rec ~= nil and not new and not again then
      if amount % 2 == 1 then redis.call('HDEL', rec, 'u') end
      if math.floor(amount / 2) % 2 == 1 then redis.call('HDEL', rec, 'k') end
      if amount >= 4 then redis.call('HDEL', rec, 'f') end
    end
    for _, k in ipairs(keys) do takeBack(k, 1) end
    take = false
  end
  if take then
    if kind ~= 'm' then amount = 1 end
    -- A free resend (a record, counted before: ARGV[3] 0) counted
    -- neither its ranges nor, in the same call, the caller's networks'
    -- budgets, only their ledgers to the country; ARGV[3] 3 gives a
    -- free resend's networks back their budgets alone (Guard.conclude).
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
end
if rec ~= nil and new then
  redis.call('DEL', rec)
elseif rec ~= nil then
  -- Not texted: not one of the number's resends either.
  local t = tonumber(redis.call('HGET', rec, 't'))
  if t ~= nil and t > 0 then redis.call('HSET', rec, 't', t - 1) end
end
return 1
