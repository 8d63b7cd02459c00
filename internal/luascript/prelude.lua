-- The prelude of every script (package luascript puts it first).
--
-- clock(per_second) is the script's now in units of 1/per_second of a
-- second (1000: milliseconds, 1000000: microseconds): ARGV[1] when the
-- caller gives it (tests, replays), else Redis TIME when ARGV[1] is "".
local function clock(per_second)
  if ARGV[1] ~= '' then
    return tonumber(ARGV[1])
  end
  local t = redis.call('TIME')
  return t[1] * per_second + math.floor(t[2] * per_second / 1000000)
end
