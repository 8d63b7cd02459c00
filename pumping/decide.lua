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
-- `bucket_ms` (24 one-hour buckets by default). Its fields are named in F,
-- the table pumping/fields.go declares and puts before this script:
--   F.oldest            the oldest bucket still inside the window
--   F.texts, F.approved the window's sums: texts counted, codes approved
--   F.textsIn .. x      texts counted in bucket x (F.approvedIn: approvals)
--   F.approvedOn .. d   codes approved in window-long "day" d
--   F.peak, F.peakDay   the largest day over the 14 days before F.peakDay
--                       (the learned baseline)
-- A subject's unverified texts are U = texts - approved, counted the moment
-- a text is sent (an approval gives it back), and its budget is
--   floor + ratio * max(approved, hour_factor * approvals in the last hour, peak)
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
-- country hash (F.restrictedSince, F.restrictedUntil, why in F.tripUsed,
-- F.tripBudget, F.tripHour, F.refused, and served by a returning number, a
-- network, a solved challenge in F.servedReturning, F.servedNetwork,
-- F.servedChallenge). The window's budget at the trip (F.tripWindow) is
-- its least for a window from F.restrictedSince (earned): the
-- restriction's refusals stop the approvals that earned it.
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
-- and keys, parseDecideReply reads the reply (see `reply` below). In short:
-- ARGV is now|"", bucket_ms, nb, mode (0 enforce, 1 shadow, 2 bypass),
-- ratio, hour_factor, restrict_ms, phone, netid, n, record, probe_ms,
-- signal, "tail days", then n triples (kind, p1, p2); verdict 1 counted, 0
-- refused (nothing counted), 2 counted although rule `rule` would refuse
-- (shadow), 3 ask again with the caller's signal (nothing counted).
--
-- Reading order: the call's arguments; a subject's window (load, store,
-- wait); the phone's record and the subjects; the signs of a real user;
-- one decide function per kind of subject (decideMoney, decideRange,
-- decideNetwork, decideSigned: an operator or a country); then the main
-- body, which decides every subject, and refuses or counts.
local now = clock(1000) -- the prelude's (internal/luascript)
local bucket, nb = tonumber(ARGV[2]), tonumber(ARGV[3])
local mode, ratio, hourf = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local restrict, netid, n = tonumber(ARGV[7]), ARGV[9], tonumber(ARGV[10])
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

-- The send's state, shared by the functions below. The phone's record
-- (readRecord): whether the number is counted in this window, approved,
-- counted in its country (recu), its challenge ledger (reck), its ledger
-- of foreign networks (recf), or has marks left from an older window
-- (stale). again: the number was texted three times since it was counted
-- or its code approved (its resends), and this text counts in the country
-- as a new number would, and is no returning user's. A resend is free so
-- that a user whose text is late is not counted twice; more than two are
-- not, or a handful of numbers admitted once could be texted at the phone
-- windows' pace (240 a day each) from rotating networks at no rule's
-- expense. The ranges keep counting a number once: the country sees a
-- spread of resends over many ranges, and a range's own numbers are its
-- measure. free: a free resend in the call that holds the number's record
-- (one primary): the caller's networks' budgets do not count it either
-- (on Cluster the caller's call is given it back: Guard.conclude); their
-- ledgers of texts to the country, which make their sign, do.
local rec, counted, verified, recu, reck, recf, stale = nil, false, false, false, false, false, false
local again, resends, free = false, 0, false
-- The subjects (readSubjects) and their state, read lazily (get): a
-- country's decision reads the caller's networks before their own turn.
local subj, state = {}, {}
-- The outcome: the first refusing subject (rule) with its unverified
-- texts, budget and wait; the subject nearest its budget; whether a
-- refusing country needs the caller's signal it was not told.
local rule, ru, rb, retry = 0, 0, 0, 0
local near, nearu, nearb, nearr = 0, 0, 0, 0.5
local unknown = false

-- A subject's window ------------------------------------------------------

-- The fields load reads of every subject first, then its kind's: a
-- learning subject's baseline, a network's probe time, a country's
-- restriction. Fewer fields a read are fewer strings made on both sides of
-- redis.call. load names HMGET's answers in this order.
local fs0, fs1 = F.textsIn .. cur, F.textsIn .. (cur - 1)
local fa0, fa1 = F.approvedIn .. cur, F.approvedIn .. (cur - 1)
local base = {F.oldest, F.texts, F.approved, fa0, fa1, fs0, fs1, F.expires}
local function fields(...)
  local f = {unpack(base)}
  for _, x in ipairs({...}) do f[#f + 1] = x end
  return f
end
local learned = fields(F.peak, F.peakDay)
local readFields = {r = learned, n = fields(F.peak, F.peakDay, F.probed), c = fields(F.peak, F.peakDay, F.restrictedUntil, F.restrictedSince, F.tripWindow), m = base}
readFields.N = readFields.n

-- bucketField says whether a field is one bucket's count.
local function bucketField(f)
  return f ~= F.texts and f ~= F.approved and
    (string.sub(f, 1, #F.textsIn) == F.textsIn or string.sub(f, 1, #F.approvedIn) == F.approvedIn)
end

-- slide moves a subject's window to now: the buckets that left it are
-- dropped and taken off its sums (all at once when every one left).
local function slide(st, b)
  if b == nil or b >= oldest then
    st.b = b or oldest
    return
  end
  if oldest - b >= nb then
    -- Every bucket the window had left it, but approve.lua, which does
    -- not move the window, may have counted an approval since: the
    -- buckets still inside are kept and summed.
    local stale, h = {}, redis.call('HGETALL', st.key)
    st.S, st.A = 0, 0
    for i = 1, #h, 2 do
      local f = h[i]
      if bucketField(f) then
        local texts = string.sub(f, 1, #F.textsIn) == F.textsIn
        local x = tonumber(string.sub(f, (texts and #F.textsIn or #F.approvedIn) + 1))
        if x < oldest then
          stale[#stale + 1] = f
        elseif texts then
          st.S = st.S + tonumber(h[i + 1])
        else
          st.A = st.A + tonumber(h[i + 1])
        end
      end
    end
    if #stale > 0 then redis.call('HDEL', st.key, unpack(stale)) end
    if cur - 1 < oldest then st.sprev = 0 end -- a one-bucket window
  else
    for x = b, oldest - 1 do
      local s, a = unpack(redis.call('HMGET', st.key, F.textsIn .. x, F.approvedIn .. x))
      st.S = st.S - (tonumber(s) or 0)
      st.A = st.A - (tonumber(a) or 0)
      if x == cur - 1 then st.sprev = 0 end -- a one-bucket window
      redis.call('HDEL', st.key, F.textsIn .. x, F.approvedIn .. x)
    end
  end
  st.b = oldest
  redis.call('HSET', st.key, F.oldest, oldest, F.texts, st.S, F.approved, st.A)
end

-- relearn refreshes a subject's learned baseline, once a day: the most
-- approvals of a day over the 14 days before this one.
local function relearn(st)
  local pk = 0
  for d = day - 14, day - 1 do
    pk = math.max(pk, tonumber(redis.call('HGET', st.key, F.approvedOn .. d)) or 0)
  end
  redis.call('HDEL', st.key, F.approvedOn .. (day - 15))
  redis.call('HSET', st.key, F.peak, pk, F.peakDay, day)
  st.pk = pk
end

-- load reads a subject in one call and moves its window to now. The
-- returned state carries S, A, pk, the current bucket's count, the
-- approvals of the last hour (the previous bucket weighted by what of it
-- is still inside the hour), and x: when the key expires, as this script
-- and approve.lua last set it (so a send costs no PTTL call).
local function load(key, learn, kind)
  local fl = base
  if learn then fl = readFields[kind] or learned end
  local b, S, A, acur, aprev, scur, sprev, x, pk, pd, extra, rs, rw = unpack(redis.call('HMGET', key, unpack(fl)))
  local st = {key = key, S = tonumber(S) or 0, A = tonumber(A) or 0, pk = tonumber(pk) or 0,
    scur = tonumber(scur) or 0, sprev = tonumber(sprev) or 0, x = tonumber(x), new = b == false}
  if kind == 'c' then
    st.rx = tonumber(extra)
    -- The window's budget its last trip holds for a window (earned).
    if rw and rs and now - tonumber(rs) < window then st.held = tonumber(rw) end
  elseif fl == readFields.n then
    st.pr = tonumber(extra)
  end
  slide(st, tonumber(b))
  if learn and tonumber(pd) ~= day and not st.new then relearn(st) end
  st.hour = (tonumber(acur) or 0) + (tonumber(aprev) or 0) * (1 - frac)
  -- The last hour's unverified texts, for the short horizon.
  st.uh = math.max(st.scur + st.sprev * (1 - frac) - st.hour, 0)
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
    f[#f + 1], f[#f + 2] = F.texts, st.S
    f[#f + 1], f[#f + 2] = F.oldest, st.b
  end
  if st.probe then f[#f + 1], f[#f + 2] = F.probed, now end
  local x = st.x
  if x == nil and not st.new then
    -- Written before expiries were kept in the hash: ask once.
    local ttl = redis.call('PTTL', st.key)
    if ttl > 0 then x = now + ttl end
  end
  if #f == 0 and st.new then return end -- nothing to keep
  local refresh = x == nil or x - now < keep - bucket
  if refresh then x = now + keep end
  if x ~= st.x then f[#f + 1], f[#f + 2] = F.expires, x end
  if #f > 0 then redis.call('HSET', st.key, unpack(f)) end
  if refresh then redis.call('PEXPIRE', st.key, keep) end
  st.x, st.new = x, false
end

-- wait is how long until dropping old buckets brings u under budget.
local function wait(key, u, budget, b, counted_is_u)
  for x = b, cur do
    local s, a = unpack(redis.call('HMGET', key, F.textsIn .. x, F.approvedIn .. x))
    s, a = tonumber(s) or 0, tonumber(a) or 0
    if counted_is_u then u = u - s else u = u - (s - a) end
    if u < budget then return (x + nb) * bucket - now end
  end
  return window
end

-- earned is a subject's budget: its floor, and ratio times the most of
-- its approvals over the window, over the last hour (times hour_factor)
-- and its learned baseline; and at least the window's budget its last
-- trip held (held, for a window from the trip: its refusals stop the
-- approvals that earned it).
local function earned(floor, st)
  return math.max(floor + ratio * math.max(st.A, hourf * st.hour, st.pk), st.held or 0)
end

-- restrictedNow says whether a country's (or a ledger's) restriction runs.
local function restrictedNow(st)
  return st.rx ~= nil and st.rx > now
end

-- The record and the subjects -------------------------------------------

-- readRecord reads the phone's record (KEYS[1]) into the send's state.
local function readRecord()
  rec = KEYS[1]
  local h, v, u, k, f, t = unpack(redis.call('HMGET', rec, F.recBucket, F.recApproved, F.recCountry,
    F.recChallenge, F.recForeign, F.recResends))
  h = tonumber(h)
  counted = h ~= nil and h >= oldest
  resends = tonumber(t) or 0
  again = counted and resends >= 3
  verified = v ~= false
  recu = counted and u ~= false
  reck = counted and k ~= false
  recf = counted and f ~= false
  stale = not counted and (u ~= false or k ~= false or f ~= false)
  free = counted and not again
end

-- readSubjects reads the n subjects' triples and keys, from KEYS[ki].
local function readSubjects(ki)
  local ai = 15
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
end

-- get is subject i's state, loaded on first use.
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

local function network(kind) return kind == 'n' or kind == 'N' end

-- The signs of a real user -----------------------------------------------

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

-- The field a restricted subject counts a signed send it served in.
local served = {r = F.servedReturning, n = F.servedNetwork, c = F.servedChallenge}

-- The kinds of subject ----------------------------------------------------
-- Each decide function reads a subject's state, sets st.refuse (and
-- st.retry, the wait, when it is the first to refuse and the mode
-- enforces) and returns the unverified texts (money, for the spend
-- ledger) and the budget the reply reports.

-- decideMoney: the spend ledger, "m". It counts the texts' price, and is
-- held to an hour's budget and a window's.
local function decideMoney(sb, st)
  local price = tonumber(sb.p1)
  local hb, db = string.match(sb.p2, '(%d+) (%d+)')
  hb, db = tonumber(hb), tonumber(db)
  local hour = st.scur + st.sprev * (1 - frac)
  st.price = price
  st.refuse = false
  if hb > 0 and hour + price > hb then
    st.refuse = true
    st.retry = (cur + 1) * bucket - now
    return hour, hb
  elseif db > 0 and st.S + price > db then
    st.refuse = true
    if rule == 0 and mode ~= 1 then st.retry = wait(sb.key, st.S + price, db + 1, st.b, true) end
    return st.S, db
  elseif db > 0 then
    return st.S, db
  end
  return hour, hb
end

-- decideRange: a block of numbers, "r". It counts distinct numbers: a
-- phone already counted in this range is one of u, so its resend is
-- refused only when the range is over budget without it.
local function decideRange(sb, st)
  local u = math.max(st.S - st.A, 0)
  local budget = earned(tonumber(sb.p1), st)
  local need = u + 1
  if counted then need = u end
  st.refuse = need > budget and mode ~= 2
  -- Only the first refusal's wait is worked out, and shadow mode, which
  -- refuses nothing, needs none.
  if st.refuse and rule == 0 and mode ~= 1 then
    st.retry = wait(sb.key, need, budget + 1, st.b, false)
  end
  return u, budget
end

-- decideNetwork: a caller network, "n", or one of its signal levels, "N"
-- (whose ledger of texts to the country is st.sub). It counts every text
-- but a free resend. Over its budget, it still admits one send every
-- probe_ms, counted from its first refusal: a shared address whose first
-- users did not verify lets real users earn it back.
local function decideNetwork(sb, st)
  local u = math.max(st.S - st.A, 0)
  local budget = earned(tonumber(sb.p1), st)
  local need = u + 1
  if free then need = u end
  st.refuse = need > budget and mode ~= 2
  if st.refuse and probe > 0 then
    -- The probe clock starts at the first refusal.
    if st.pr == nil then
      redis.call('HSET', sb.key, F.probed, now)
    elseif now - st.pr >= probe then
      st.refuse, st.probe = false, true
    end
  end
  if st.refuse and rule == 0 and mode ~= 1 then
    st.retry = wait(sb.key, need, budget + 1, st.b, false)
  end
  return u, budget
end

-- decideChallenged: a send with a solved challenge passes an operator or
-- a country, within the budget its own kind earns in the subject's
-- challenge ledger (when p2 is "1"): a solving farm's sends are not
-- approved, real people's are.
local function decideChallenged(sb, st, floor)
  local ch = load(sb.ch, true, 'ch')
  st.ch = ch
  local add = 1
  if reck and not again then add = 0 end
  st.chadd = add
  local u, budget = math.max(ch.S - ch.A, 0), earned(floor, ch)
  if u + add > budget and string.sub(sb.p2, 1, 1) == '1' then
    st.refuse = true
    st.retry = wait(sb.ch, u + add, budget + 1, ch.b, false)
  end
  return u, budget
end

-- refusedInHour counts one more send a ledger of networks known abroad
-- refused over its budget or while restricted, within the hour since the
-- first of them, and returns the count; ledgerWrites writes it.
local function refusedInHour(led)
  local oq, ot = unpack(redis.call('HMGET', led.key, F.abroadRefused, F.abroadRefusedSince))
  oq, ot = tonumber(oq) or 0, tonumber(ot) or 0
  if now - ot >= bucket then oq, ot = 0, now end
  led.oq = oq + 1
  led.refusals = {F.abroadRefused, led.oq, F.abroadRefusedSince, ot}
  return led.oq
end

-- ledgerWrites is what a send changed in a ledger besides its counts: its
-- refusals counted (abroad, in the hour: refusedInHour; its own while
-- restricted, per period: pressing) and its restriction tripped or
-- renewed (nil when nothing).
local function ledgerWrites(led)
  if led.refusals == nil then return led.trip end
  local f = {unpack(led.refusals)}
  for _, x in ipairs(led.trip or {}) do f[#f + 1] = x end
  return f
end

-- trip restricts a ledger (a country's own, or its ledger of networks
-- known abroad) from now, with why when it was not restricted already.
-- The refusals that led to the trip are the restriction's.
local function trip(led, lrestricted, used, budget, hourOnly, wbudget)
  local f = {F.restrictedUntil, now + restrict}
  if not lrestricted then
    local nq = 0
    if led.oq then nq = led.oq - 1 end
    f = {F.restrictedUntil, now + restrict, F.restrictedSince, now, F.tripUsed, math.floor(used),
      F.tripBudget, math.floor(budget), F.tripHour, hourOnly and 1 or 0, F.tripWindow, math.floor(wbudget), F.refused, nq,
      F.servedReturning, 0, F.servedNetwork, 0, F.servedChallenge, 0,
      F.pressureNow, 1, F.pressureSince, now, F.pressureLast, 0, F.pressurePeak, 1}
  end
  led.trip = f
  led.rx = now + restrict
end

-- pressing counts a send its own restricted ledger refuses in the
-- ledger's current period (a sixth of a bucket: 10 minutes by default)
-- and says whether the refusals still run at a quarter of their busiest
-- period since the trip, this period's or the last's: the pressure that
-- tripped it goes on. ledgerWrites writes the counts.
local function pressing(led)
  local pq, pt, pl, pp = unpack(redis.call('HMGET', led.key, F.pressureNow, F.pressureSince, F.pressureLast, F.pressurePeak))
  pq, pt, pl, pp = tonumber(pq) or 0, tonumber(pt) or 0, tonumber(pl) or 0, tonumber(pp) or 0
  local period = math.floor(bucket / 6)
  if now - pt >= 2 * period then
    pq, pt, pl = 0, now, 0
  elseif now - pt >= period then
    pq, pt, pl = 0, pt + period, pq
  end
  pq = pq + 1
  pp = math.max(pp, pq)
  led.refusals = {F.pressureNow, pq, F.pressureSince, pt, F.pressureLast, pl, F.pressurePeak, pp}
  return math.max(pq, pl) * 4 >= pp
end

-- restrictLedger trips the ledger an unsigned send counts in when it is
-- over a budget, and returns whether the ledger is restricted now. Real
-- travellers come in bursts: a ledger of networks known abroad refuses
-- the sends over its budget, and is restricted only at the third such
-- refusal within an hour (a spread reaches it within minutes; an hour of
-- travellers seldom). Sends from abroad still arriving while it is
-- restricted keep it restricted, the room travellers earn it theirs again
-- only once the spread stops: while the sends it refused within the hour
-- are more than its floor and twice the travellers' approvals of an
-- average hour. Real travellers alone let it lapse (each of them renewing
-- it, it would never end).
local function restrictLedger(st, led, lfloor, over, overh, u, budget, add, wbudget)
  local lrestricted = restrictedNow(led)
  local tripped = over or overh
  if tripped and st.abroad and not lrestricted then tripped = refusedInHour(led) >= 3 end
  -- Its own ledger, restricted: a send it refuses renews it only while
  -- the pressure that tripped it goes on (pressing), so real users alone,
  -- refused once the attack stopped, do not hold it on.
  if lrestricted and not st.abroad and (tripped or add == 1) and not pressing(led) then tripped = false end
  if tripped then
    trip(led, lrestricted, u + add, budget, overh and not over, wbudget)
    lrestricted = true
  elseif st.abroad and lrestricted and add == 1 then
    if refusedInHour(led) > lfloor + ratio * 2 * led.A / nb then
      led.trip = {F.restrictedUntil, now + restrict}
      led.rx = now + restrict
    end
  end
  return lrestricted
end

-- decideUnsigned: a send with no sign of a real user to an operator or a
-- country. It counts in the subject's own ledger or, from a network known
-- abroad, in the subject's ledger of foreign networks, with a third of its
-- floor, so a spread from proxies abroad restricts those networks without
-- restricting the country's own users; over the window's budget or the
-- hour's, the ledger is restricted (restrictLedger). An operator's (p2's
-- second character "o") ledger of foreign networks keeps only the hour's:
-- its travellers are too few for a window's budget to learn, and the
-- country's ledger, which its sends count in too, keeps the window's.
local function decideUnsigned(sb, st, floor)
  local restricted = restrictedNow(st)
  local led, lfloor, hourOnly = st, floor, false
  if st.abroad then
    led = load(sb.fo, true, 'c')
    lfloor = math.max(math.floor(floor / 3), 1)
    st.fo = led
    hourOnly = string.sub(sb.p2, 2, 2) == 'o'
  end
  -- A resend to a number already counted is one of u.
  local add = 1
  if (recu or recf) and not again then add = 0 end
  local u, budget = math.max(led.S - led.A, 0), earned(lfloor, led)
  local wbudget = budget
  local bh = lfloor + ratio * led.hour
  -- An operator's travellers keep their average hour's room too.
  if hourOnly then bh = lfloor + math.max(ratio * led.hour, math.ceil(ratio * led.A / nb)) end
  local over = u + add > budget and not hourOnly
  -- An operator's own ledger has the short horizon once it learned a day.
  local short = string.sub(sb.p2, 2, 2) ~= 'o' or st.abroad or led.pk > 0
  local overh = short and led.uh + add > bh
  if (overh and not over) or hourOnly then u, budget = led.uh, bh end
  local lrestricted = restrictLedger(st, led, lfloor, over, overh, u, budget, add, wbudget)
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
  return u, budget
end

-- decideSigned: an operator or a country, "c". It counts the distinct
-- numbers texted without a sign of a real user (decideUnsigned); a send
-- with one counts nowhere but, with a solved challenge, the challenge
-- ledger (decideChallenged), and a restricted subject serves it.
local function decideSigned(sb, st)
  local floor = tonumber(sb.p1)
  -- The signs of a real user, cheapest first: the same for every
  -- subject of this kind (an operator, its country), read once.
  local sig, ns = signs(sb.ret)
  if ns == '2' then
    st.abroad = true
  elseif ns == '?' then
    st.unknown = true
  end
  st.sig = sig
  if sig == nil then return decideUnsigned(sb, st, floor) end
  local u, budget = math.max(st.S - st.A, 0), earned(floor, st)
  if sig == 'c' then u, budget = decideChallenged(sb, st, floor) end
  st.add = 0
  st.refuse = st.refuse or false
  if restrictedNow(st) and not st.refuse then st.served = served[sig] end
  return u, budget
end

local decideKind = {m = decideMoney, r = decideRange, n = decideNetwork, N = decideNetwork, c = decideSigned}

-- The send: decided, then refused or counted ------------------------------

-- decideAll decides the subjects in order, and stops at the first that
-- refuses when the mode enforces: nothing will be counted, the rest need
-- no look. Only the first refusing rule is reported.
local function decideAll()
  for i = 1, n do
    local st = get(i)
    local u, budget = decideKind[subj[i].kind](subj[i], st)
    st.u, st.budget = u, budget
    if st.refuse and rule == 0 then
      rule, ru, rb, retry = i, u, budget, st.retry or 0
    end
    if budget > 0 and u / budget >= nearr then
      near, nearu, nearb, nearr = i, u, budget, u / budget
    end
    if rule > 0 and mode ~= 1 then break end
  end
end

-- reply is the call's answer, as decide.go's parseDecideReply reads it:
-- {verdict, rule, U, B, retry_ms, near, nearU, nearB, bucket, new,
-- signal, cnew}.
local function reply(verdict, sigout, new, cnew)
  return {verdict, rule, math.floor(ru), math.floor(rb), math.ceil(retry), near, math.floor(nearu),
    math.floor(nearb), cur, new, sigout, cnew}
end

-- refuse answers an enforced refusal, which counts nothing. A refusing
-- operator or country writes its ledgers' trips (each ledger keeps its
-- own, or its renewal, even while the country's own restriction is the
-- one that refuses) and counts the refusal where the console reads it;
-- one that needs the caller's signal (Cluster) writes nothing and asks
-- again with it.
local function refuse(sigout)
  local st = state[rule]
  if st.kind == 'c' then
    if unknown then
      near, nearu, nearb = 0, 0, 0
      return reply(3, sigout, 0, 0)
    end
    local w = ledgerWrites(st)
    if w then redis.call('HSET', st.key, unpack(w)) end
    local fw = st.fo and ledgerWrites(st.fo)
    if fw then redis.call('HSET', st.fo.key, unpack(fw)) end
    local led = st
    if st.fo and not restrictedNow(st) then led = st.fo end
    redis.call('HINCRBY', led.key, F.refused, 1)
    if led.new then
      -- The refusal is all the key holds (a solved challenge refused by
      -- its ledger's budget, say): it expires as a counted key does.
      redis.call('HSET', led.key, F.expires, now + keep)
      redis.call('PEXPIRE', led.key, keep)
    end
  end
  return reply(0, sigout, 0, 0)
end

-- countSubject counts the send in one subject, its ledgers and its
-- signal level's ledger, and returns what an operator or a country
-- counted anew: the number, in its challenge ledger, in its ledger of
-- foreign networks.
local function countSubject(st)
  local add = 1
  if st.kind == 'm' then add = st.price end
  local skip = (st.kind == 'r' and counted) or (free and network(st.kind)) or (st.kind == 'c' and (st.add == 0 or st.fo ~= nil))
  if not skip then st.scur, st.S = st.scur + add, st.S + add end
  local cf = st.fo ~= nil and st.add == 1
  if cf then st.fo.scur, st.fo.S = st.fo.scur + 1, st.fo.S + 1 end
  if st.fo then store(st.fo, st.add == 1, ledgerWrites(st.fo)) end
  local ck = st.ch ~= nil and st.chadd == 1
  if ck then
    st.ch.scur, st.ch.S = st.ch.scur + 1, st.ch.S + 1
    store(st.ch, true)
  end
  -- A country's restriction, tripped or extended, is written with its
  -- counts: one HSET.
  store(st, not skip, ledgerWrites(st))
  if st.sub then
    -- The network's ledger of texts to this country counts every text:
    -- its users' resends are part of whether they verify (its sign).
    st.sub.scur, st.sub.S = st.sub.scur + 1, st.sub.S + 1
    store(st.sub, true)
  end
  if st.served then redis.call('HINCRBY', st.key, st.served, 1) end
  return st.kind == 'c' and not skip, ck, cf
end

-- countAll counts the send everywhere and returns the cnew bits: what the
-- subjects that take signs counted (an operator and its country always
-- count alike: the same signs, the same record, so one set serves both).
local function countAll()
  local cu, ck, cf = false, false, false
  for i = 1, n do
    local u, k, f = countSubject(state[i])
    cu, ck, cf = cu or u, ck or k, cf or f
  end
  return (cu and 1 or 0) + (ck and 2 or 0) + (cf and 4 or 0)
end

-- writeRecord notes the send in the phone's record: the caller network to
-- credit, the resends, the bucket it was counted in (when anew), and
-- which of the country's ledgers counted it (cnew's bits) for approve.lua
-- and release.lua.
local function writeRecord(cnew)
  local t = resends + 1
  if not counted then t = 1 end
  local f = {F.recNetwork, netid, F.recResends, t}
  if not counted then
    f[#f + 1], f[#f + 2] = F.recBucket, cur
    if verified or stale then
      redis.call('HDEL', rec, F.recApproved, F.recCountry, F.recOwed, F.recChallenge, F.recForeign)
    end
  end
  if cnew % 2 == 1 then f[#f + 1], f[#f + 2] = F.recCountry, 1 end
  if math.floor(cnew / 2) % 2 == 1 then f[#f + 1], f[#f + 2] = F.recChallenge, 1 end
  if cnew >= 4 then f[#f + 1], f[#f + 2] = F.recForeign, 1 end
  -- A new code to a number already approved in the window: the networks
  -- counted this text, so its approval is theirs to credit (approve.lua).
  if counted and verified then f[#f + 1], f[#f + 2] = F.recOwed, 1 end
  redis.call('HSET', rec, unpack(f))
  redis.call('PEXPIRE', rec, window)
end

local ki = 1
if ARGV[11] == '1' then
  readRecord()
  ki = 2
end
readSubjects(ki)
decideAll()
local sigout = -1
if netsig == '' then sigout = callerSignal() end
if rule > 0 and mode ~= 1 then return refuse(sigout) end
local verdict = 1
if rule > 0 then verdict = 2 end
local cnew = countAll()
if rec ~= nil then writeRecord(cnew) end
local new = 0
if rec ~= nil and not counted then
  new = 1
elseif again then
  new = 2
end
return reply(verdict, sigout, new, cnew)
