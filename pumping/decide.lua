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
-- A subject's unverified texts are U = S - A, counted the moment a text is
-- sent (an approval gives it back), and its budget is
--   floor + ratio * max(A, hour_factor * approvals in the last hour, pk)
-- so a subject whose codes are approved earns room in proportion, a quiet
-- one keeps its cold-start floor, and a range or country with weeks of
-- history keeps its learned room through a slow hour.
--
-- The country counts only the texts that carry no sign of a real user: a
-- returning number (it approved a code within the last `returning` days,
-- kept in a hash per block of 10,000 numbers), or a caller network (IPv4
-- /24 or /16, IPv6 /48 or /32) whose own codes to this country are approved
-- (its ledger of texts to the country: at least one approval, unverified
-- at most its approvals, over the window and over the last hour; and none
-- of those levels worse). Those texts are also held to a short
-- horizon: unverified texts of the last hour at most floor + ratio * the
-- hour's approvals, so a surge nobody verifies counts at once. A country
-- over either budget is restricted for `restrict_ms`: sends without a sign
-- of a real user are refused, the others are served and counted in the
-- country hash (fields rs since, rx until, ru/rb/rh why, nq refused, nr/nn/nc
-- served by a returning number, a network, a solved challenge).
--
-- An operator (the country's numbers one mobile operator owns, as
-- libphonenumber's prefix data names it) is a subject of the same kind,
-- "c", with keys of its own under the country's hash tag, listed just
-- before its country and with half its floor: an attack on its ranges
-- restricts it first, and what it then refuses counts nowhere, so the
-- country's other operators are served; the country's budget still catches
-- a spread over all of them. Both read the same signs (once, `signs`) and
-- the same record, so they always count alike: one set of cnew bits.
--
-- The protocol (KEYS, the ARGV positions, the reply) is documented once, in
-- decide.go: decideArgs builds ARGV, decideSubject says each kind's triple
-- and keys, parseDecideReply reads the reply {verdict, rule, U, B, retry_ms,
-- near, nearU, nearB, bucket, new, signal, cnew}. In short: ARGV is now|"",
-- bucket_ms, nb, mode (0 enforce, 1 shadow, 2 bypass), ratio, hour_factor,
-- restrict_ms, phone, netid, n, record, probe_ms, signal, "tail days", then
-- n triples (kind, p1, p2); verdict 1 counted, 0 refused (nothing
-- counted), 2 counted although rule `rule` would refuse (shadow), 3 ask
-- again with the caller's signal (nothing counted).
local now = clock(1000) -- the prelude's (internal/luascript)
local bucket, nb = tonumber(ARGV[2]), tonumber(ARGV[3])
local mode, ratio, hourf = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local restrict, phone, netid = tonumber(ARGV[7]), ARGV[8], ARGV[9]
local probe = tonumber(ARGV[12]) or 0
local netsig = ARGV[13]
local tail, retdays = string.match(ARGV[14], '(%d*) (%d+)')
retdays = tonumber(retdays) or 0
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
local fs0, fs1, fa0, fa1 = 's' .. cur, 's' .. (cur - 1), 'a' .. cur, 'a' .. (cur - 1)
-- The fields each kind of subject reads, the ones every kind needs first:
-- fewer fields a read are fewer strings made on both sides of redis.call.
-- A learning subject also reads its baseline (pk, pd), a network its probe
-- time (pr), a country its restriction (rx).
local base = {'b', 'S', 'A', fa0, fa1, fs0, fs1, 'x'}
local function fields(...)
  local f = {unpack(base)}
  for _, x in ipairs({...}) do f[#f + 1] = x end
  return f
end
local learned = fields('pk', 'pd')
local readFields = {r = learned, n = fields('pk', 'pd', 'pr'), c = fields('pk', 'pd', 'rx'), m = base}
readFields.N = readFields.n

local function load(key, learn, kind)
  local fl = base
  if learn then fl = readFields[kind] or learned end
  local v = redis.call('HMGET', key, unpack(fl))
  local st = {key = key, S = tonumber(v[2]) or 0, A = tonumber(v[3]) or 0, pk = tonumber(v[9]) or 0,
    scur = tonumber(v[6]) or 0, sprev = tonumber(v[7]) or 0, x = tonumber(v[8]), new = v[1] == false}
  if kind == 'c' then st.rx = tonumber(v[11]) elseif fl[11] == 'pr' then st.pr = tonumber(v[11]) end
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
  if learn and tonumber(v[10]) ~= day and (v[1] ~= false) then
    local pk = 0
    for d = day - 14, day - 1 do
      pk = math.max(pk, tonumber(redis.call('HGET', key, 'd' .. d)) or 0)
    end
    redis.call('HDEL', key, 'd' .. (day - 15))
    redis.call('HSET', key, 'pk', pk, 'pd', day)
    st.pk = pk
  end
  st.hour = (tonumber(v[4]) or 0) + (tonumber(v[5]) or 0) * (1 - frac)
  -- The last hour's unverified texts, for the short horizon.
  st.uh = math.max(st.scur + st.sprev * (1 - frac) - st.hour, 0)
  st.b = b
  return st
end

-- store writes what a send changed in a subject in one call: its counts
-- when counted, the probe's time, the extra fields (a country's
-- restriction), and a new expiry when the key would
-- otherwise outlive its window by less than keep - bucket (a key keeps its
-- counts at least a window past its last send; approve.lua's longer expiry
-- for the learned baseline is never shortened).
local function store(st, counted, extra)
  local f = extra or {}
  if counted then
    f[#f + 1], f[#f + 2] = fs0, st.scur
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
local ki, ai = 1, 15
local rec, counted, verified, recu, reck, recf, stale = nil, false, false, false, false, false, false
-- again: the number was texted three times since it was counted or its
-- code approved (field t), and this text counts in the country as a new number
-- would, and is no returning user's. A resend is free so that a user
-- whose text is late is not counted twice; more than two are not, or a
-- handful of numbers admitted once could be texted at the phone windows'
-- pace (240 a day each) from rotating networks at no rule's expense. The
-- ranges keep counting a number once: the country sees a spread of
-- resends over many ranges, and a range's own numbers are its measure.
local again, resends = false, 0
if ARGV[11] == '1' then
  rec = KEYS[1]
  ki = 2
  local r = redis.call('HMGET', rec, 'h', 'v', 'u', 'k', 'f', 't')
  local h = tonumber(r[1])
  counted = h ~= nil and h >= oldest
  resends = tonumber(r[6]) or 0
  again = counted and resends >= 3
  verified = r[2] ~= false
  recu = counted and r[3] ~= false
  reck = counted and r[4] ~= false
  recf = counted and r[5] ~= false
  stale = not counted and (r[3] ~= false or r[4] ~= false or r[5] ~= false)
end
-- A free resend in the call that holds the number's record (one primary):
-- the caller's networks' budgets do not count it either (on Cluster the
-- caller's call is given it back: Guard.conclude); their ledgers of texts
-- to the country, which make their sign, do.
local free = rec ~= nil and counted and not again
local function network(kind) return kind == 'n' or kind == 'N' end

-- refusedInHour counts one more send a ledger of networks known abroad
-- refused over its budget or while restricted, within the hour since the
-- first of them (fields oq, ot), and returns the count; the write is
-- ledgerWrites'.
local function refusedInHour(led)
  local o = redis.call('HMGET', led.key, 'oq', 'ot')
  local oq, ot = tonumber(o[1]) or 0, tonumber(o[2]) or 0
  if now - ot >= bucket then oq, ot = 0, now end
  oq = oq + 1
  led.over = {'oq', oq, 'ot', ot}
  return oq
end

-- ledgerWrites is what a send changed in a ledger besides its counts: its
-- restriction tripped or renewed, and its refusals in the hour (nil when
-- nothing).
local function ledgerWrites(led)
  if led.over == nil then return led.trip end
  local f = {unpack(led.over)}
  for _, x in ipairs(led.trip or {}) do f[#f + 1] = x end
  return f
end
-- The subjects, read lazily: a country's decision reads the caller's
-- networks before their own turn.
local subj, state = {}, {}
for i = 1, n do
  local sb = {kind = ARGV[ai], p1 = ARGV[ai + 1], p2 = ARGV[ai + 2], key = KEYS[ki]}
  ai, ki = ai + 3, ki + 1
  if sb.kind == 'c' then
    sb.ch, sb.ret, sb.fo = KEYS[ki], KEYS[ki + 1], KEYS[ki + 2]
    ki = ki + 3
  elseif sb.kind == 'N' then
    sb.sub = KEYS[ki]
    ki = ki + 1
  end
  subj[i] = sb
end
local function get(i)
  local st = state[i]
  if st == nil then
    local sb = subj[i]
    st = load(sb.key, sb.kind ~= 'm', sb.kind)
    st.kind = sb.kind
    if sb.sub then st.sub = load(sb.sub, false) end
    state[i] = st
  end
  return st
end

-- good says whether a network level's own codes to this country are
-- approved: some approval, and at most as many texts unverified as
-- approved over the window and over the last hour (a text of slack for
-- the sender's own, two in the hour for codes still being typed): half its
-- texts or more verify, as real users' do (resends included).
local function good(st)
  return st.A >= 1 and st.S - st.A <= st.A + 1 and st.uh <= st.hour + 2
end

-- foreign says whether a network level is known for real users of other
-- countries rather than of this one: at least two codes approved
-- elsewhere, and more than twice as many as here. A send from it to this
-- country is most likely a proxy abroad; the few real users travelling
-- there earn room in the ledger of networks known abroad, not a sign for
-- the network.
local function foreign(all, here)
  local elsewhere = all.A - here.A
  return elsewhere >= 2 and here.A * 2 < elsewhere
end

-- callerSignal is 2 when the widest signal level of the caller's networks
-- in this call (IPv4 /16, IPv6 /32: an ISP's allocation, whose users live
-- in one country) is foreign, else 1 when a level is good and none is bad,
-- 0 when none is good, -1 with none here.
local function callerSignal()
  local any, ok, bad, abroad = false, false, false, false
  for i = 1, n do
    if subj[i].kind == 'N' then
      local all = get(i)
      local st = all.sub
      if not any and foreign(all, st) then abroad = true end
      any = true
      if good(st) then
        ok = true
      elseif st.S - st.A > st.A + 1 then
        bad = true
      end
    end
  end
  if not any then return -1 end
  if abroad then return 2 end
  if ok and not bad then return 1 end
  return 0
end

-- signs is the send's sign of a real user ('c' a solved challenge, 'r' a
-- returning number, 'n' an approving caller network, nil none) and the
-- caller networks' signal as decide reads it (ARGV[13], or worked out
-- here), read once for all the subjects that take signs (an operator, its
-- country).
local signCache = nil
local function signs(ret)
  if signCache then return signCache[1], signCache[2] end
  local sig, ns = nil, nil
  if mode == 2 then
    sig = 'c'
  else
    if retdays > 0 and tail ~= '' and not again then
      local d = tonumber(redis.call('HGET', ret, tail))
      if d ~= nil and d >= math.floor(now / 86400000) - retdays then sig = 'r' end
    end
    if sig == nil then
      ns = netsig
      if ns == '' then ns = tostring(callerSignal()) end
      if ns == '1' then sig = 'n' end
    end
  end
  signCache = {sig, ns}
  return sig, ns
end

local verdict, rule, ru, rb, retry = 1, 0, 0, 0, 0
local near, nearu, nearb, nearr = 0, 0, 0, 0.5
local unknown = false

for i = 1, n do
  local kind, p1, p2 = subj[i].kind, subj[i].p1, subj[i].p2
  local key = subj[i].key
  local st = get(i)
  local u, budget
  if kind == 'm' then
    local price = tonumber(p1)
    local hb, db = string.match(p2, '(%d+) (%d+)')
    hb, db = tonumber(hb), tonumber(db)
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
  elseif kind == 'c' then
    local floor = tonumber(p1)
    local restricted = st.rx ~= nil and st.rx > now
    -- The signs of a real user, cheapest first: the same for every
    -- subject of this kind (an operator, its country), read once.
    local sig, ns = signs(subj[i].ret)
    if ns == '2' then
      st.abroad = true
    elseif ns == '?' then
      st.unknown = true
    end
    st.sig = sig
    u = math.max(st.S - st.A, 0)
    budget = floor + ratio * math.max(st.A, hourf * st.hour, st.pk)
    if sig == 'c' then
      -- A solved challenge passes, within the budget its own kind earns: a
      -- solving farm's sends are not approved, real people's are.
      local ch = load(subj[i].ch, true, 'ch')
      st.ch = ch
      local add = 1
      if reck and not again then add = 0 end
      st.chadd = add
      u = math.max(ch.S - ch.A, 0)
      budget = floor + ratio * math.max(ch.A, hourf * ch.hour, ch.pk)
      if u + add > budget and p2 == '1' then
        st.refuse = true
        st.retry = wait(subj[i].ch, u + add, budget + 1, ch.b, false)
      end
    end
    if sig == nil then
      -- The ledger this send counts in: the country's, or, from a network
      -- known abroad, the country's ledger of foreign networks, with
      -- a third of its floor, so a spread from proxies abroad restricts
      -- those networks without restricting the country's own users.
      local led, lfloor = st, floor
      if st.abroad then
        led = load(subj[i].fo, true, 'c')
        lfloor = math.max(math.floor(floor / 3), 1)
        st.fo = led
      end
      local lrestricted = led.rx ~= nil and led.rx > now
      -- A resend to a number already counted is one of u.
      local add = 1
      if (recu or recf) and not again then add = 0 end
      u = math.max(led.S - led.A, 0)
      budget = lfloor + ratio * math.max(led.A, hourf * led.hour, led.pk)
      local bh = lfloor + ratio * led.hour
      local over = u + add > budget
      local overh = led.uh + add > bh
      if overh and not over then u, budget = led.uh, bh end
      local trip = over or overh
      if trip and st.abroad and not lrestricted then
        -- Real travellers come in bursts: a ledger of networks known
        -- abroad refuses the sends over its budget, and is restricted
        -- only at the third such refusal within an hour (a spread
        -- reaches it within minutes; an hour of travellers seldom).
        trip = refusedInHour(led) >= 3
      end
      if trip then
        local f = {'rx', now + restrict}
        if not lrestricted then
          -- The refusals that led to the trip are the restriction's.
          local nq = 0
          if led.over then nq = led.over[2] - 1 end
          f = {'rx', now + restrict, 'rs', now, 'ru', math.floor(u + add), 'rb', math.floor(budget),
            'rh', (overh and not over) and 1 or 0, 'nq', nq, 'nr', 0, 'nn', 0, 'nc', 0}
        end
        led.trip = f
        led.rx = now + restrict
        lrestricted = true
      elseif st.abroad and lrestricted and add == 1 then
        -- Sends from abroad still arriving while their ledger is
        -- restricted keep it restricted, the room travellers earn it
        -- theirs again only once the spread stops: while the sends it
        -- refused within the hour are more than its floor and twice the
        -- travellers' approvals of an average hour. Real travellers alone
        -- let it lapse (each of them renewing it, it would never end).
        if refusedInHour(led) > lfloor + ratio * 2 * led.A / nb then
          led.trip = {'rx', now + restrict}
          led.rx = now + restrict
        end
      end
      st.refuse = (over or overh or ((restricted or lrestricted) and add == 1)) and mode ~= 2
      st.add = add
      if st.refuse and mode ~= 1 then
        st.retry = math.max(math.max(st.rx or 0, led.rx or 0) - now, 1000)
        if not (restricted or lrestricted) then
          -- Refused over budget, not restricted: the hour's counts move
          -- at the next bucket.
          st.retry = (cur + 1) * bucket - now
        end
        if st.unknown then unknown = true end
      end
    else
      st.add = 0
      st.refuse = st.refuse or false
      if restricted and not st.refuse then st.served = 'n' .. sig end
    end
  else
    local S, A, b = st.S, st.A, st.b
    u = math.max(S - A, 0)
    budget = tonumber(p1) + ratio * math.max(A, hourf * st.hour, st.pk)
    -- A phone already counted in this range is one of u: its resend is
    -- refused only when the range is over budget without it.
    local need = u + 1
    if (kind == 'r' and counted) or (free and network(kind)) then need = u end
    st.refuse = need > budget and mode ~= 2
    if st.refuse and kind ~= 'r' and probe > 0 then
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
      st.retry = wait(key, need, budget + 1, b, false)
    end
  end
  st.u, st.budget = u, budget
  if st.refuse and rule == 0 then
    rule, ru, rb, retry = i, u, budget, st.retry or 0
  end
  if budget > 0 and u / budget >= nearr then
    near, nearu, nearb, nearr = i, u, budget, u / budget
  end
  -- Enforced and refused: nothing will be counted, the rest need no look.
  if rule > 0 and mode ~= 1 then break end
end

local sigout = -1
if netsig == '' then sigout = callerSignal() end

if rule > 0 and mode ~= 1 then
  local st = state[rule]
  if st.kind == 'c' then
    if unknown then
      -- Cluster, the caller's signal not known: ask again with it.
      return {3, rule, math.floor(ru), math.floor(rb), math.ceil(retry), 0, 0, 0, cur, 0, sigout, 0}
    end
    -- Each ledger keeps its own trip (or its renewal), even while the
    -- country's own restriction is the one that refuses; the refusal is
    -- counted where the console reads it.
    if st.trip then redis.call('HSET', st.key, unpack(st.trip)) end
    local fw = st.fo and ledgerWrites(st.fo)
    if fw then redis.call('HSET', st.fo.key, unpack(fw)) end
    local led = st
    if st.fo and not (st.rx ~= nil and st.rx > now) then led = st.fo end
    redis.call('HINCRBY', led.key, 'nq', 1)
  end
  return {0, rule, math.floor(ru), math.floor(rb), math.ceil(retry), near, math.floor(nearu), math.floor(nearb), cur, 0, sigout, 0}
end
if rule > 0 then verdict = 2 end

-- Count the send everywhere.
local cu, ck, cf = false, false, false
for i = 1, n do
  local st = state[i]
  local add = 1
  if st.kind == 'm' then add = st.price end
  local skip = (st.kind == 'r' and counted) or (free and network(st.kind)) or (st.kind == 'c' and (st.add == 0 or st.fo ~= nil))
  if not skip then
    st.scur, st.S = st.scur + add, st.S + add
  end
  -- cnew's bits say what the subjects that take signs counted; an
  -- operator and its country always count alike (the same signs, the same
  -- record), so one set of bits serves both.
  if st.kind == 'c' and not skip then cu = true end
  if st.fo and st.add == 1 then
    st.fo.scur, st.fo.S = st.fo.scur + 1, st.fo.S + 1
    cf = true
  end
  if st.fo then store(st.fo, st.add == 1, ledgerWrites(st.fo)) end
  if st.ch and st.chadd == 1 then
    st.ch.scur, st.ch.S = st.ch.scur + 1, st.ch.S + 1
    store(st.ch, true)
    ck = true
  end
  -- A country's restriction, tripped or extended, is written with its
  -- counts: one HSET.
  store(st, not skip, st.trip)
  if st.sub then
    -- The network's ledger of texts to this country counts every text:
    -- its users' resends are part of whether they verify (its sign).
    st.sub.scur, st.sub.S = st.sub.scur + 1, st.sub.S + 1
    store(st.sub, true)
  end
  if st.served then redis.call('HINCRBY', st.key, st.served, 1) end
end
local cnew = (cu and 1 or 0) + (ck and 2 or 0) + (cf and 4 or 0)
if rec ~= nil then
  local f = {'n', netid, 't', resends + 1}
  if not counted then
    f[#f + 1], f[#f + 2], f[4] = 'h', cur, 1
    if verified or stale then redis.call('HDEL', rec, 'v', 'u', 'w', 'k', 'f') end
  end
  if cnew % 2 == 1 then f[#f + 1], f[#f + 2] = 'u', 1 end
  if math.floor(cnew / 2) % 2 == 1 then f[#f + 1], f[#f + 2] = 'k', 1 end
  if cnew >= 4 then f[#f + 1], f[#f + 2] = 'f', 1 end
  -- A new code to a number already approved in the window: the networks
  -- counted this text, so its approval is theirs to credit (approve.lua).
  if counted and verified then f[#f + 1], f[#f + 2] = 'w', 1 end
  redis.call('HSET', rec, unpack(f))
  redis.call('PEXPIRE', rec, window)
end
local new = 0
if rec ~= nil and not counted then
  new = 1
elseif again then
  new = 2
end
return {verdict, rule, math.floor(ru), math.floor(rb), math.ceil(retry), near, math.floor(nearu), math.floor(nearb), cur, new, sigout, cnew}
