-- The job fields a worker needs, by their place in the order lib/redis/job-codec.ts's jobFromFields reads
-- them (from one HGETALL: bookkeeping fields, and what the take itself sets, do not travel back): those every
-- job has first (name, data, createdOn, attemptsStarted), so a job with the default options ends its list
-- there; then the options (backoff .. lifo), which make job.opts (absent ones, the defaults, come back as
-- nil). `token` is dropped from the reply (set to nil; its place carries a handed-back run's startedOn).
-- `deps` (a flow's parent: a finish that removes it at once removes its flow keys with it, finish-16.lua)
-- comes after it, added after the others so that each of theirs kept its letter; `stalledCounter` (a job that
-- stalled: written only by a stall) after it, then `repeatJobKey` (a job scheduler's run). Written as literals, not
-- built by a loop: a script's top level runs on every call, and inserting 26 keys one by one (the table
-- grown six times) cost each call some 5 µs of Redis time.
local FIELD_AT = {
  name = 1, data = 2, createdOn = 3, attemptsStarted = 4, attempts = 5, attemptsMade = 6, lastError = 7,
  retried = 8, progress = 9, stacktrace = 10, backoff = 11, keep = 12, keepFailed = 13, keepLogs = 14,
  priority = 15, stackTraceLimit = 16, delay = 17, lifo = 18, deid = 19, parentKey = 20, parent = 21,
  defa = 22, token = 23, deps = 24, stalledCounter = 25, repeatJobKey = 26,
}
local F_NAME, F_DATA, F_CREATED, F_STARTS, F_PRIORITY, F_TOKEN = 1, 2, 3, 4, 15, 23
-- The letter a field after data travels under (replyFields): the one at its place, 'c' for createdOn (the
-- third) .. 'w' for the token's place, 'x' for deps, 'y' for stalledCounter, 'z' for repeatJobKey (lib/redis/taking.ts
-- fieldsOf).
local CODE = { nil, nil, 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r', 's', 't', 'u', 'v', 'w', 'x', 'y', 'z' }

-- The fields of FIELD_AT of a job, by place (nil for an absent one), from one HGETALL: a job hash holds few
-- fields (a job with the default options, five at its take), and asking HMGET for 26 names scans the hash
-- once per name and converts 25 replies. Also returns the last of them present, the token aside
-- (replyFields ends the reply's list there). The hand reads the same fields: `priority` says whether the
-- job waited in `prioritized` (so its reservation has a score kept in `reservedScores`, which its take then
-- drops: confirmStarts).
local function readJob(jobKey)
  local all = rcall('HGETALL', jobKey)
  -- Room made at once, as a table grown from empty rehashes as it grows: for the fields every job has, or
  -- (a hash of more than those and its state: a job with options, or taken before) for every field, which
  -- keeps them all in the table's array (a field past its size went to a hash part made for it).
  local f, top
  if #all > 8 then
    f, top = {
      nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
    }, 0
  else
    f, top = { nil, nil, nil, nil }, 0
  end
  for i = 1, #all, 2 do
    local at = FIELD_AT[all[i]]
    if at then
      f[at] = all[i + 1]
      if at > top and at ~= F_TOKEN then
        top = at
      end
    end
  end
  return f, top
end

-- A job's id from its key, `<prefix>:{q}:<id>`: the ids a caller names travel once, as their keys (the
-- queue's keys share the part before the id with `active`, `<prefix>:{q}:active`).
local function idOf(q, jobKey)
  return string.sub(jobKey, #q.active - 5)
end

-- A run's token from what a call sends for it: a start number alone (digits, no ':') is a run of the
-- calling worker, "<taker.token>:<n>", whose token then travels once per call; anything else is the
-- whole token.
local function tokenOf(taker, sent)
  if taker.token ~= '' and not string.find(sent, ':', 1, true) then
    return taker.token .. ':' .. sent
  end
  return sent
end

-- The start number of a job's next run, as text: "1" for a job never taken (no token, no attemptsStarted),
-- which needs no number formatted.
local function nextStart(f)
  if not (f[F_TOKEN] or f[F_STARTS]) then
    return '1'
  end
  return string.format('%d', startsOf(f[F_TOKEN], f[F_STARTS]) + 1)
end

-- What replyFields writes one reply's jobs against: the call's time (its text, and its first 8 digits), and
-- the name and createdOn of the job before in the same list.
local function replyClock(now)
  local text = string.format('%d', now)
  return { text = text, head = string.sub(text, 1, 8) }
end

-- A job's fields as they travel back: the run's token is not among them (the worker builds it from its own
-- token and the start number, `attemptsStarted`, absent for "1", a job's first run). The name and
-- createdOn are absent when they are the job's before in the list (jobs added together: mostly all of
-- them; a comparison, as Lua strings are interned); else createdOn travels as its digits after the 8 it
-- shares with the call's time (in the reply; a job created in the last minute or so), or whole, with "="
-- before a value shorter than the call's time (so that no whole value reads as such digits), and "" for a
-- job without one. The absent fields at the end of the list are left off (the reply's list ends at the
-- last field present): a job with the default options taken for the first time ends at its data, or at
-- createdOn. `startedOn` (a run handed back again, not started now) takes the token's place. Name and
-- data go by place; the fields after them only when present, each prefixed by CODE.
local function replyFields(out, len, f, top, clock, startedOn)
  f[F_TOKEN] = startedOn
  if f[F_STARTS] == '1' then
    f[F_STARTS] = nil
  elseif f[F_STARTS] and top < F_STARTS then
    top = F_STARTS
  end
  local name, created = f[F_NAME], f[F_CREATED]
  if name == clock.name then
    f[F_NAME] = nil
  else
    clock.name = name
  end
  if created == clock.created then
    f[F_CREATED] = nil
  else
    clock.created = created
    if not created then
      f[F_CREATED] = ''
      top = math.max(top, F_CREATED)
    elseif #created == #clock.text and string.sub(created, 1, 8) == clock.head then
      f[F_CREATED] = string.sub(created, 9)
    elseif #created < #clock.text then
      f[F_CREATED] = '=' .. created
    end
  end
  if startedOn and top < F_TOKEN then
    top = F_TOKEN
  end
  while top > 0 and not f[top] do
    top = top - 1
  end
  -- Into the caller's flat list: how many fields, then each (an absent one before the last present as
  -- false, which Redis sends as a null; a nil would end the list). A list of its own per job cost each
  -- reply a table, and Redis's conversion of a table (it looks for seven special fields in each) more.
  if top < F_CREATED then
    out[len + 1] = top
    for k = 1, top do
      out[len + 1 + k] = f[k] or false
    end
    return len + 1 + top
  end
  -- The fields after data travel only when present, each as CODE[k] .. value: an absent one cost a null
  -- (5 bytes) when a later one was present (a priority: twelve of them at most), a present one now costs
  -- one byte more.
  out[len + 2], out[len + 3] = f[F_NAME] or false, f[F_DATA] or false
  local n = F_DATA
  for k = F_CREATED, top do
    if f[k] then
      n = n + 1
      out[len + 1 + n] = CODE[k] .. f[k]
    end
  end
  out[len + 1] = n
  return len + 1 + n
end

-- meta's `paused`, `limitedUntil`, `adopted` and `nexts` (finish-16.lua), and the queue's own limits
-- (`concurrency`, `max` and `duration`: queue.setGlobalConcurrency, setGlobalRateLimit), read once per call
-- however many steps ask (cached in `q`): a queue without them pays empty fields of one HMGET.
local function holdOf(q)
  if q.hold == nil then
    local meta = rcall('HMGET', q.meta, 'paused', 'limitedUntil', 'adopted', 'concurrency', 'max', 'duration', 'nexts')
    q.hold = {
      paused = meta[1] ~= false, limitedUntil = tonumber(meta[2]), adopted = meta[3] ~= false,
      concurrency = tonumber(meta[4]), max = tonumber(meta[5]), duration = tonumber(meta[6]), nexts = meta[7] ~= false,
    }
  end
  return q.hold
end

-- The limiter that applies: the queue's (setGlobalRateLimit) over the worker's, as BullMQ's. Returns its
-- most starts per window (0 for none) and the window (ms).
local function limitOf(q, taker)
  local hold = holdOf(q)
  if hold.max and hold.duration then
    return hold.max, hold.duration
  end
  return taker.max, taker.duration
end

-- Whether jobs may be set aside ahead of their start (reserveNext, readHand): not while the queue is paused,
-- nor under a limiter or a global concurrency, which only a take's admission applies (a job in hand would
-- start before Redis counts it).
local function setsAside(q, taker)
  local hold = holdOf(q)
  return not (hold.paused or hold.concurrency or limitOf(q, taker) > 0)
end

-- The wait that says the queue runs as many jobs as its global concurrency allows: the worker asks again
-- once one of its own runs ends, or after a short nap (lib/worker/taking.ts MAXED_NAP_MS).
local MAXED = -2

-- How many jobs may start now, and otherwise how long to wait (ms): nothing while the queue is paused
-- (meta's `paused`; wait -1: the marker says when there is work again) or held back by queue.rateLimit
-- (meta's `limitedUntil`); no more than its global concurrency less the jobs `active` (wait MAXED); with a
-- limiter (limitOf) { max, duration }, at most `max` starts in any `duration` (a sliding window over
-- `limiter`, one member per start scored by its time, so every window of `duration` holds at most `max`,
-- across every worker). Returns room, wait ms (0 when room > 0).
local function admission(q, taker, now)
  local hold = holdOf(q)
  if hold.paused then
    return 0, -1
  end
  local limitedUntil = hold.limitedUntil
  if limitedUntil and limitedUntil > now then
    return 0, limitedUntil - now
  end
  local room = math.huge
  if hold.concurrency then
    room = hold.concurrency - rcall('ZCARD', q.active)
    if room <= 0 then
      return 0, MAXED
    end
  end
  local max, duration = limitOf(q, taker)
  if max <= 0 then
    return room, 0
  end
  rcall('ZREMRANGEBYSCORE', q.limiter, '-inf', string.format('%d', now - duration))
  local starts = max - rcall('ZCARD', q.limiter)
  if starts > 0 then
    return math.min(room, starts), 0
  end
  local oldest = tonumber(rcall('ZRANGE', q.limiter, 0, 0, 'WITHSCORES')[2]) or now
  return 0, math.max(1, oldest + duration - now)
end

-- Takes candidate jobs and gives each a lease. `taker` is the worker: { token, leaseMs (a string, as
-- Redis gets it), name, maxBytes, max, duration (its limiter; max 0 for none) }. `at` says where the
-- candidates are: candidate i (i = 0 .. at.count - 1) has its job hash at KEYS[at.firstKey + 2i] (its id
-- read from that key, idOf) and its lease at KEYS[at.firstKey + 2i + 1]; `at.reserved` says they were
-- reserved by this worker (ZSET `q.reserved`), else read from the tail of `wait` or the head of
-- `prioritized`. A candidate no longer there (another worker took it; a reservation that expired went
-- back, where it is looked for too) is skipped. The reply holds whole jobs, so it is bounded in bytes:
-- once a job is taken, a candidate whose data would bring the total past taker.maxBytes is left where it
-- is, and so are the candidates after it; so are those beyond what admission() lets start. Each job
-- taken emits `active`. The leases enter `active` in one ZADD, after the loop (nothing in it reads
-- `active` for a job it took: an id named twice is found neither reserved nor waiting its second time).
-- Returns { id, n, field 1 .. field n, id, n, ... } (the fields as replyFields sends them: the run's token is
-- "<taker.token>:<start number>"; startedOn in the token's place only when it is not `now`, a run handed
-- back again), the candidates left, how long to wait before asking again (ms; 0: no need, -1: the queue is
-- paused, MAXED), and how many jobs were taken.
local function takeJobs(q, taker, now, at)
  local firstKey, n = at.firstKey, at.count
  -- `taken` is flat (see replyFields): `len` its length, `count` the jobs in it.
  local taken, left, bytes, len, count = {}, {}, 0, 0, 0
  if n == 0 then
    return taken, left, 0, 0
  end
  local room, wait = admission(q, taker, now)
  local limitMax, limitWindow = limitOf(q, taker)
  local limited = limitMax > 0
  -- Candidates were read from the tail; look only that far (plus what may have been pushed since), so a
  -- long `wait` list never costs a full scan.
  local window = string.format('%d', 2 * n + 64)
  -- Numbers reach redis.call as strings: Redis would otherwise format each one again.
  local nowText, deadline = string.format('%d', now), string.format('%d', now + tonumber(taker.leaseMs))
  local clock = replyClock(now)
  -- Most jobs are taken for the first time: their token, built once.
  local firstToken = taker.token .. ':1'
  local ids = {}
  for i = 0, n - 1 do
    ids[i + 1] = idOf(q, KEYS[firstKey + 2 * i])
  end
  local scoredReservations = at.reserved and rcall('HLEN', q.reservedScores) > 0
  -- The taken reservations' kept scores (reservations.lua), dropped in one HDEL after the loop.
  local indexed, unscored = {}, {}
  for i = 0, n - 1 do
    local id = ids[i + 1]
    if count >= room then
      for k = i, n - 1 do
        left[#left + 1] = ids[k + 1]
      end
      break
    end
    local jobKey, lockKey = KEYS[firstKey + 2 * i], KEYS[firstKey + 2 * i + 1]
    -- One ZREM per id (ZMSCORE would answer for all in one call, but formats each score as a float).
    local reserved = at.reserved and rcall('ZREM', q.reserved, id) == 1
    local from = reserved and 'reserved'
    if not from and rcall('LPOS', q.wait, id, 'RANK', '-1', 'MAXLEN', window) then
      from = 'wait'
    elseif not from and rcall('ZSCORE', q.prioritized, id) then
      from = 'prioritized'
    end
    if from then
      local f, top = readJob(jobKey)
      local size = f[F_DATA] and #f[F_DATA] or 0
      if count > 0 and bytes + size > taker.maxBytes then
        if reserved then
          rcall('ZADD', q.reserved, deadline, id)
        end
        for k = i, n - 1 do
          left[#left + 1] = ids[k + 1]
        end
        break
      end
      if from == 'wait' then
        rcall('LREM', q.wait, '-1', id)
      elseif from == 'prioritized' then
        rcall('ZREM', q.prioritized, id)
      elseif scoredReservations then
        unscored[#unscored + 1] = id
      end
      -- A job removed meanwhile leaves only its id behind: drop it.
      if f[F_NAME] then
        local started = nextStart(f)
        local token = started == '1' and firstToken or taker.token .. ':' .. started
        -- GET: its reply is the lease before (none), not an "OK" status, which Lua receives as a table.
        rcall('SET', lockKey, token, 'PX', taker.leaseMs, 'GET')
        indexed[#indexed + 1] = deadline
        indexed[#indexed + 1] = id
        rcall('HSET', jobKey, 'state', 'active', 'token', token, 'startedOn', nowText, 'workerName', taker.name)
        if limited then
          -- One member per start: the job and its start number (a run token alone repeats across jobs).
          rcall('ZADD', q.limiter, nowText, id .. ':' .. started)
        end
        f[F_STARTS] = started
        taken[len + 1] = id
        len = replyFields(taken, len + 1, f, top, clock)
        count = count + 1
        bytes = bytes + size
        emit(q, 'active', 'jobId', id, 'prev', 'waiting')
      end
    elseif rcall('ZSCORE', q.active, id) then
      -- In flight under this worker's token: a replay of a call whose reply was lost (or a run the worker
      -- already has, which it skips). Hand it back rather than strand it until a sweep charges a stall.
      -- A live lease is renewed; a lapsed one is left for the worker's heartbeat to reclaim (reclaim-2.lua
      -- clears a sweep's mark as it writes the lease: a marked job has had no lease since, see sweep-11).
      local token = rcall('HGET', jobKey, 'token')
      local holder = rcall('GET', lockKey)
      if token and string.sub(token, 1, #taker.token + 1) == taker.token .. ':' and (holder == false or holder == token) then
        if holder == token then
          rcall('SET', lockKey, token, 'PX', taker.leaseMs)
          indexed[#indexed + 1] = deadline
          indexed[#indexed + 1] = id
        end
        local g, top = readJob(jobKey)
        local startedOn = rcall('HGET', jobKey, 'startedOn')
        g[F_STARTS] = string.format('%d', startsOf(g[F_TOKEN], g[F_STARTS]))
        taken[len + 1] = id
        len = replyFields(taken, len + 1, g, top, clock, startedOn ~= nowText and startedOn or nil)
        count = count + 1
      end
    end
  end
  if #indexed > 0 then
    zaddMany(q.active, indexed)
  end
  if #unscored > 0 then
    rcall('HDEL', q.reservedScores, unpack(unscored))
  end
  if limited and count > 0 then
    -- The window's starts outlive it by nothing: an idle limited queue keeps no limiter.
    rcall('PEXPIRE', q.limiter, limitWindow)
  end
  if count > 0 and count >= room then
    local _
    _, wait = admission(q, taker, now)
  end
  return taken, left, wait, count
end

-- Reserves up to `n` ids for this worker's next calls: from the tail of `wait` (the next to be served),
-- then, when `wait` runs out, from the head of `prioritized` (its score kept in `reservedScores`, so a
-- reservation handed back returns to its place; reservations.lua). They go to `q.reserved`, scored by
-- when the reservation expires (a sweep returns expired ones; a closing worker returns its own at once).
-- Reserving touches no job hash, so a busy worker knows its next candidates without reading `wait`
-- itself, and no two workers get the same. Nothing is reserved while the queue is paused, or for a
-- worker with a limiter (its starts are paced anyway), or in a queue with a global concurrency (a job in
-- hand would start before Redis counts it). The worker asks for no more than its bound
-- (lib/worker/take-ahead.ts AHEAD_ROOM): what a job added with a higher priority may wait behind.
local function reserveNext(q, taker, n, until_)
  if n <= 0 or not setsAside(q, taker) then
    return {}
  end
  local ids = rcall('RPOP', q.wait, n) or {}
  local scored, score = {}, string.format('%d', until_)
  for i, id in ipairs(ids) do
    scored[2 * i - 1], scored[2 * i] = score, id
  end
  if #ids < n then
    -- ZPOPMIN's reply is id, score, ...: what `reservedScores` keeps, in one HSET.
    local popped = rcall('ZPOPMIN', q.prioritized, n - #ids)
    for j = 1, #popped, 2 do
      ids[#ids + 1] = popped[j]
      scored[#scored + 1] = score
      scored[#scored + 1] = popped[j]
    end
    if #popped >= 2 * SKIPLIST_FROM then
      -- Behind a long field, so Redis makes (or keeps) it a hash table: as a listpack, each id set and
      -- dropped would scan all the others (skiplist.lua says why for sorted sets).
      rcall('HSET', q.reservedScores, longMember(), '', unpack(popped))
      rcall('HDEL', q.reservedScores, longMember())
    elseif #popped > 0 then
      rcall('HSET', q.reservedScores, unpack(popped))
    end
  end
  if #ids > 0 then
    zaddMany(q.reserved, scored)
  end
  return ids
end

-- Reads ids this worker reserved into its hand: each job's fields and the token it will run under,
-- without taking it. The job stays reserved (waiting, as every count says) and unleased until it starts;
-- the call that follows its start takes it (confirmStarts). So a worker that dies with a job in hand
-- leaves a reservation, which the sweep returns with no attempt used: only a job that started is ever
-- charged one. Nothing is read while the queue is paused or has a global limit. `at` = { firstKey, count }: job i's hash is
-- KEYS[at.firstKey + i] (a read needs no lease key). Returns { id, n, n fields, ... } (the
-- fields and token as takeJobs says, as flat; a job removed meanwhile is left out). A job with a priority (its
-- fields say) waited in `prioritized`: its start's confirm drops the score its reservation kept.
local function readHand(q, taker, now, at)
  local handed, len = {}, 0
  -- With a global limit, a reservation made before it was set is taken as a candidate (takeJobs, admitted)
  -- rather than started from a hand, which no admission checks.
  if at.count == 0 or not setsAside(q, taker) then
    return handed
  end
  local clock = replyClock(now)
  for i = 0, at.count - 1 do
    local jobKey = KEYS[at.firstKey + i]
    local f, top = readJob(jobKey)
    if f[F_NAME] then
      f[F_STARTS] = nextStart(f)
      handed[len + 1] = idOf(q, jobKey)
      len = replyFields(handed, len + 1, f, top, clock)
    end
  end
  return handed
end

-- Takes the jobs a worker started from its hand (readHand), each under the token it was read with: a
-- job still reserved gets its lease, its deadline in `active`, its start stamped and `active` emitted,
-- as takeJobs would have done (so the hand costs no command more than a take; the deadlines enter
-- `active` in one ZADD). One whose reservation is gone (it expired and a
-- sweep returned it, or the job was removed) is lost to the run: code 0. A replay of this call (its reply
-- was lost) finds the job already under its token: code 1. `at` = { firstKey, firstArg, count }: start i
-- has its hash and lease at KEYS[at.firstKey + 2i], KEYS[at.firstKey + 2i + 1] (its id read from the
-- hash's key), its token at ARGV[at.firstArg + 2i] (as tokenOf reads it) and "1" at ARGV[at.firstArg +
-- 2i + 1] when readHand said scored. Returns the codes, one character per job, in one string.
local function confirmStarts(q, taker, now, at)
  if at.count == 0 then
    return ''
  end
  local codes, unscored, indexed = {}, {}, {}
  local nowText, deadline = string.format('%d', now), string.format('%d', now + tonumber(taker.leaseMs))
  for i = 0, at.count - 1 do
    local a = at.firstArg + 2 * i
    local jobKey, lockKey = KEYS[at.firstKey + 2 * i], KEYS[at.firstKey + 2 * i + 1]
    local id, token = idOf(q, jobKey), tokenOf(taker, ARGV[a])
    if rcall('ZREM', q.reserved, id) == 1 then
      if ARGV[a + 1] == '1' then
        unscored[#unscored + 1] = id
      end
      rcall('SET', lockKey, token, 'PX', taker.leaseMs, 'GET')
      indexed[#indexed + 1] = deadline
      indexed[#indexed + 1] = id
      rcall('HSET', jobKey, 'state', 'active', 'token', token, 'startedOn', nowText, 'workerName', taker.name)
      emit(q, 'active', 'jobId', id, 'prev', 'waiting')
      codes[i + 1] = '1'
    elseif rcall('HGET', jobKey, 'token') == token then
      codes[i + 1] = '1'
    else
      codes[i + 1] = '0'
    end
  end
  if #indexed > 0 then
    zaddMany(q.active, indexed)
  end
  if #unscored > 0 then
    rcall('HDEL', q.reservedScores, unpack(unscored))
  end
  return table.concat(codes)
end

-- The ids at the head of the line, next first, without taking them: the tail of `wait`, then the head
-- of `prioritized`. What a finish peeks at for the calls after it.
local function peekNext(q, n)
  if n <= 0 then
    return {}
  end
  local tail = rcall('LRANGE', q.wait, -n, -1)
  local ids = {}
  for i = #tail, 1, -1 do
    ids[#ids + 1] = tail[i]
  end
  if #ids < n then
    for _, id in ipairs(rcall('ZRANGE', q.prioritized, 0, n - #ids - 1)) do
      ids[#ids + 1] = id
    end
  end
  return ids
end
