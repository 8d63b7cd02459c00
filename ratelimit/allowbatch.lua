-- Decides several requests in turn, each exactly as allow.lua alone would:
-- one call for the lot (redisbatch.Merge; the protocol is documented once,
-- in allow.go, at allowBatchArgs). allow(KEYS, ARGV) is allow.lua, defined
-- before this file (allowBatchScript).
--
-- ARGV[1] is the number of decisions d, then allow.lua's ARGV of the first
-- decision, then the tickets of the other d - 1; KEYS are each decision's
-- allow.lua KEYS in turn, as many each. The decisions share one clock: one
-- TIME for the lot, as if they came in the same microsecond.
local d = tonumber(ARGV[1])
local argv = {}
for i = 2, #ARGV - d + 1 do argv[i - 1] = ARGV[i] end
if argv[1] == '' then
  local t = redis.call('TIME')
  argv[1] = t[1] .. ('000000'):sub(#t[2] + 1) .. t[2] -- as allow.lua makes it
end
local nk = #KEYS / d
local keys, replies = {}, {}
for i = 1, d do
  if i > 1 then argv[2] = ARGV[#ARGV - d + i] end
  for j = 1, nk do keys[j] = KEYS[(i - 1) * nk + j] end
  local ok, r = pcall(allow, keys, argv)
  if not ok and type(r) ~= 'table' then r = {err = tostring(r)} end
  replies[i] = r -- an error is a table {err = ...}: an error reply in the list
end
return replies
