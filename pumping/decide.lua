-- Decides the pumping rules of one send for one group of subjects and, when
-- they pass, counts the send in every subject of the group: check and count
-- are one atomic step, so two replicas can never both slip under a budget.
--
-- A group is the keys that share a hash tag (one Redis Cluster slot): the
-- destination group (the phone's record, its number ranges, its country) or
-- the caller group (the client's networks), or the spend ledger. On a single
-- primary the service passes every group in one call.
--
-- Every subject is a hash counting over a window of `nb` buckets of
-- `bucket_ms` (24 one-hour buckets by default):
--   b        the oldest bucket still inside the window
--   S, A     the window's sums: texts counted, codes approved
--   s<x>     texts counted in bucket x; a<x> codes approved in bucket x
--   d<day>   codes approved in window-long "day" `day`
--   pk, pd   the largest d over the 14 days before pd (the learned baseline)
-- A subject's unverified texts are U = S - A (a country counts only texts
-- whose code was not approved within the grace period, see below), and its
-- budget is
--   floor + ratio * max(A, hour_factor * approvals in the last hour, pk)
-- so a subject whose codes are approved earns room in proportion, a quiet
-- one keeps its cold-start floor, and a range or country with weeks of
-- history keeps its learned room through a slow hour.
--
-- KEYS     the group's keys, read in order by the kinds in ARGV
-- ARGV[1]  now in ms, or "" for Redis TIME (only the simulation passes one)
-- ARGV[2]  bucket_ms
-- ARGV[3]  nb: buckets in the window
-- ARGV[4]  mode: 0 enforce (count only if every rule passes), 1 shadow
--          (decide, count anyway), 2 bypass (count; only the spend ledger
--          decides: a solved challenge passes the pumping rules, not the
--          money budgets)
-- ARGV[5]  ratio, exact as Go's shortest formatting
-- ARGV[6]  hour_factor
-- ARGV[7]  grace_ms: a country's text counts as unverified this long after it
--          was sent, unless approved
-- ARGV[8]  the phone (E.164), for the record and the country's pending set
-- ARGV[9]  the caller's network id, kept in the phone's record so that an
--          approval credits the networks that asked for the text
-- ARGV[10] number of subjects; their kind, p1, p2 follow ARGV[12]
--   kind "r" range:   counts distinct phones (the record says whether this
--                     phone is already counted); p1 floor.       keys: 1
--   kind "c" country: counts texts not approved within grace;   keys: 2
--                     (the country hash, its pending set); p1 floor
--   kind "n" network: counts every text; p1 floor.               keys: 1
--   kind "m" money:   the spend ledger; p1 the text's price (micro-units),
--                     p2 "hour_budget day_budget" (0: none).     keys: 1
-- ARGV[11] 1 when KEYS[1] is the phone's record (the destination group, even
--          with no range or country rule on, so an approval can find the
--          networks to credit)
-- ARGV[12] probe_ms: a network over its budget still admits one send this
--          often, counted from its first refusal (0: never). A shared address (a carrier's CGNAT) whose first
--          few users did not verify would otherwise refuse everyone behind
--          it for a whole window, and nobody could verify to earn it room;
--          one probe per period lets real users earn it back, and costs an
--          attacker's held network a text per period.
--
-- Returns {verdict, rule, U, B, retry_ms, near, nearU, nearB, bucket, new}:
-- bucket is the one counted in and new 1 when the phone was counted anew,
-- for a release (see release.lua); verdict 1
-- counted, 0 refused (nothing counted), 2 counted although rule `rule`
-- would refuse (shadow); rule is the 1-based subject; U and B its unverified
-- texts and budget (money in micro-units); retry_ms how long until the
-- subject has room again if nothing is approved meanwhile. near is the
-- subject closest to its budget (0 when all are under half), for the
-- operators' "near their budgets" list.
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(ARGV[1])
end
local bucket, nb = tonumber(ARGV[2]), tonumber(ARGV[3])
local mode, ratio, hourf = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local grace, phone, netid = tonumber(ARGV[7]), ARGV[8], ARGV[9]
local probe = tonumber(ARGV[12]) or 0
local cur = math.floor(now / bucket)
local frac = (now % bucket) / bucket
local oldest = cur - nb + 1
local day = math.floor(cur / nb)
local window = bucket * nb

local keep = 2 * window

-- load reads a subject in one call and moves its window to now, dropping the
-- buckets that left it, and refreshes its learned baseline once a day. The
-- returned state carries S, A, pk, the current bucket's count, the approvals
-- of the last hour (the previous bucket weighted by what of it is still
-- inside the hour), and x: when the key expires, as this script and
-- approve.lua last set it (so a send costs no PTTL call).
local function load(key, learn)
  local v = redis.call('HMGET', key, 'b', 'S', 'A', 'pk', 'pd', 'a' .. cur, 'a' .. (cur - 1),
    's' .. cur, 's' .. (cur - 1), 'x', 'pr')
  local st = {key = key, S = tonumber(v[2]) or 0, A = tonumber(v[3]) or 0, pk = tonumber(v[4]) or 0,
    scur = tonumber(v[8]) or 0, sprev = tonumber(v[9]) or 0, x = tonumber(v[10]), pr = tonumber(v[11]),
    new = v[1] == false}
  local b = tonumber(v[1])
  if b == nil then
    b = oldest
  elseif b < oldest then
    if oldest - b >= nb then
      -- Everything left the window: drop every bucket at once.
      local stale = {}
      for _, f in ipairs(redis.call('HKEYS', key)) do
        local k = string.sub(f, 1, 1)
        if (k == 's' or k == 'a') and f ~= 'S' and f ~= 'A' then stale[#stale + 1] = f end
      end
      if #stale > 0 then redis.call('HDEL', key, unpack(stale)) end
      st.S, st.A, st.scur, st.sprev, st.wiped = 0, 0, 0, 0, true
    else
      for x = b, oldest - 1 do
        local r = redis.call('HMGET', key, 's' .. x, 'a' .. x)
        st.S = st.S - (tonumber(r[1]) or 0)
        st.A = st.A - (tonumber(r[2]) or 0)
        if x == cur - 1 then st.sprev = 0 end -- a one-bucket window
        redis.call('HDEL', key, 's' .. x, 'a' .. x)
      end
    end
    b = oldest
    redis.call('HSET', key, 'b', b, 'S', st.S, 'A', st.A)
  end
  if learn and tonumber(v[5]) ~= day and (v[1] ~= false) then
    local pk = 0
    for d = day - 14, day - 1 do
      pk = math.max(pk, tonumber(redis.call('HGET', key, 'd' .. d)) or 0)
    end
    redis.call('HDEL', key, 'd' .. (day - 15))
    redis.call('HSET', key, 'pk', pk, 'pd', day)
    st.pk = pk
  end
  st.hour = (tonumber(v[6]) or 0) + (tonumber(v[7]) or 0) * (1 - frac)
  st.b = b
  return st
end

-- store writes what a send changed in a subject in one call: its counts
-- when counted, the probe's time, and a new expiry when the key would
-- otherwise outlive its window by less than keep - bucket (a key keeps its
-- counts at least a window past its last send; approve.lua's longer expiry
-- for the learned baseline is never shortened).
local function store(st, counted)
  local f = {}
  if counted then
    f[#f + 1], f[#f + 2] = 's' .. cur, st.scur
    f[#f + 1], f[#f + 2] = 'S', st.S
    f[#f + 1], f[#f + 2] = 'b', st.b
  end
  if st.probe then f[#f + 1], f[#f + 2] = 'pr', now end
  local x = st.x
  if x == nil and not st.new then
    -- Written before expiries were kept in the hash: ask once.
    local ttl = redis.call('PTTL', st.key)
    if ttl > 0 then x = now + ttl end
  end
  if #f == 0 and st.new then return end -- nothing to keep
  local refresh = x == nil or x - now < keep - bucket
  if refresh then x = now + keep end
  if x ~= st.x then f[#f + 1], f[#f + 2] = 'x', x end
  if #f > 0 then redis.call('HSET', st.key, unpack(f)) end
  if refresh then redis.call('PEXPIRE', st.key, keep) end
  st.x, st.new = x, false
end

-- wait is how long until dropping old buckets brings u under budget.
local function wait(key, u, budget, b, counted_is_u)
  for x = b, cur do
    local r = redis.call('HMGET', key, 's' .. x, 'a' .. x)
    local s, a = tonumber(r[1]) or 0, tonumber(r[2]) or 0
    if counted_is_u then u = u - s else u = u - (s - a) end
    if u < budget then return (x + nb) * bucket - now end
  end
  return window
end

local n = tonumber(ARGV[10])
local ki, ai = 1, 13
local rec, counted, verified = nil, false, false
if ARGV[11] == '1' then
  rec = KEYS[1]
  ki = 2
  local r = redis.call('HMGET', rec, 'h', 'v')
  local h = tonumber(r[1])
  counted = h ~= nil and h >= oldest
  verified = r[2] ~= false
end
local state = {}
local verdict, rule, ru, rb, retry = 1, 0, 0, 0, 0
local near, nearu, nearb, nearr = 0, 0, 0, 0.5

for i = 1, n do
  local kind, p1, p2 = ARGV[ai], ARGV[ai + 1], ARGV[ai + 2]
  ai = ai + 3
  local key = KEYS[ki]
  ki = ki + 1
  local st, u, budget
  if kind == 'm' then
    local price = tonumber(p1)
    local hb, db = string.match(p2, '(%d+) (%d+)')
    hb, db = tonumber(hb), tonumber(db)
    st = load(key, false)
    local S, b = st.S, st.b
    local hour = st.scur + st.sprev * (1 - frac)
    st.price = price
    st.refuse = false
    if hb > 0 and hour + price > hb then
      u, budget, st.refuse = hour, hb, true
      st.retry = (cur + 1) * bucket - now
    elseif db > 0 and S + price > db then
      u, budget, st.refuse = S, db, true
      if rule == 0 and mode ~= 1 then st.retry = wait(key, S + price, db + 1, b, true) end
    elseif db > 0 then
      u, budget = S, db
    else
      u, budget = hour, hb
    end
  else
    local due = 0
    local pend
    if kind == 'c' then
      pend = KEYS[ki]
      ki = ki + 1
      -- Texts whose grace ran out unapproved become unverified, in the
      -- bucket of the moment they do.
      due = redis.call('ZREMRANGEBYSCORE', pend, '-inf', now - grace)
    end
    st = load(key, true)
    st.pend = pend
    if due > 0 and not st.wiped then
      st.S, st.scur = st.S + due, st.scur + due
      -- Written now: they count whatever this send's verdict.
      store(st, true)
    end
    local S, A, b = st.S, st.A, st.b
    if kind == 'c' then u = S else u = math.max(S - A, 0) end
    budget = tonumber(p1) + ratio * math.max(A, hourf * st.hour, st.pk)
    -- A phone already counted in this range is one of u: its resend is
    -- refused only when the range is over budget without it.
    local need = u + 1
    if kind == 'r' and counted then need = u end
    if kind == 'c' then need = u end -- its text counts only once due
    st.refuse = need > budget and mode ~= 2
    if st.refuse and kind == 'n' and probe > 0 then
      -- The probe clock starts at the first refusal.
      local last = st.pr
      if last == nil then
        redis.call('HSET', key, 'pr', now)
      elseif now - last >= probe then
        st.refuse, st.probe = false, true
      end
    end
    -- Only the first refusing rule is reported: only its wait is worked out,
    -- and shadow mode, which refuses nothing, needs none.
    if st.refuse and rule == 0 and mode ~= 1 then
      st.retry = wait(key, need, budget + 1, b, kind == 'c')
    end
  end
  st.kind = kind
  st.u, st.budget = u, budget
  state[i] = st
  if st.refuse and rule == 0 then
    rule, ru, rb, retry = i, u, budget, st.retry or 0
  end
  if budget > 0 and u / budget >= nearr then
    near, nearu, nearb, nearr = i, u, budget, u / budget
  end
  -- Enforced and refused: nothing will be counted, the rest need no look.
  if rule > 0 and mode ~= 1 then break end
end

if rule > 0 then
  if mode ~= 1 then
    return {0, rule, math.floor(ru), math.floor(rb), math.ceil(retry), near, math.floor(nearu), math.floor(nearb), cur, 0}
  end
  if mode == 1 then verdict = 2 end
end

-- Count the send everywhere.
for i = 1, n do
  local st = state[i]
  local add = 1
  if st.kind == 'm' then add = st.price end
  local skip = (st.kind == 'r' and counted) or st.kind == 'c'
  if not skip then
    st.scur, st.S = st.scur + add, st.S + add
  end
  store(st, not skip)
  if st.kind == 'c' then
    redis.call('ZADD', st.pend, now, phone)
    redis.call('PEXPIRE', st.pend, keep)
  end
end
if rec ~= nil then
  if not counted then
    redis.call('HSET', rec, 'h', cur, 'n', netid)
    if verified then redis.call('HDEL', rec, 'v') end
  else
    redis.call('HSET', rec, 'n', netid)
  end
  redis.call('PEXPIRE', rec, window)
end
local new = 0
if rec ~= nil and not counted then new = 1 end
return {verdict, rule, math.floor(ru), math.floor(rb), math.ceil(retry), near, math.floor(nearu), math.floor(nearb), cur, new}
