--[[
  Adds jobs (one, or a bulk), each only when its id is free (an existing job is left as it is). A job
  with a delay waits in `delayed` until it is due; the others go to the back of `wait` (the front with
  lifo), or with a priority to `prioritized` (see enter.lua). One call is atomic; queue.addBulk sends its
  calls in one MULTI, so a bulk is added all or none.

  KEYS[1] wait         LIST   <prefix>:{q}:wait
  KEYS[2] delayed      ZSET   <prefix>:{q}:delayed (id -> due time, ms)
  KEYS[3] marker       ZSET   <prefix>:{q}:marker
  KEYS[4] meta         HASH   <prefix>:{q}:meta
  KEYS[5] events       STREAM <prefix>:{q}:events
  KEYS[6] listened     ZSET   <prefix>:{q}:listened
  KEYS[7] prioritized  ZSET   <prefix>:{q}:prioritized (id -> priority * 2^32 + counter)
  KEYS[7 + i]          HASH   job i (i = 1 .. n)
  With F = 4 (a call with deduplicated jobs, see deduplicate.lua), after the jobs' keys: the deduplication
  key STRING <prefix>:{q}:de:<id> of each job with a deduplication, in the jobs' order; then, for each of
  those whose caller expects a holder of its id, in the same order, the holder's HASH, and with `replace`
  its LIST (logs: only a replaced holder's are deleted)

  ARGV[1] fields per job (F): 2 when every job of the call has the default options, 3 with their options,
    4 with also their deduplication; followed by 'u' when the call's job ids are distinct (the caller
    knows: ids it generated are, and it compares custom ones), which lets one EXISTS for the call stand
    for one a job
  ARGV[2 + F(i-1) .. 1 + F i], for job i (its id is its key's last part: <prefix>:{q}:<id>, not sent again):
    name; data (JSON text); with F >= 3 its options: those not at their default, each a letter and the
    value as the job hash stores it, joined by ';' ("" for none; letters: OPTION_FIELDS below; values:
    attempts, the total starts allowed; delay, ms; backoff, "<type>,<delay>,<maxDelay>,<jitter>", see
    backoff.lua; keep and keepFailed, the retention in `completed` and `failed`, "<count>,<ageMs>" or "0"
    to remove at once, see retention.lua; keepLogs, lines; priority, 1 = highest .. 2^21 - 1; lifo, "1" to
    the front of `wait`; stackTraceLimit); with F = 4 its deduplication ("<ttl>,<extend><delayed><n>,<holder
    expected, n bytes><id>", see deduplicate.lua; "" for none)
  `delay` and `lifo` are stored when given (for job.opts), not read by any script but a reschedule's.
  The caller leaves out an option at its default (lib/redis/job-codec.ts): the scripts read an absent field
  as its default, so a job with the defaults costs no byte for them, here or in its hash.

  Returns { now (ms, Redis's clock), codes }: codes one character a job, '1' added or '0' its id was taken;
  with F = 4 a list instead, per job 1, 0, the holder's id (deduplicated) or '?<holder>' (not the holder
  the caller expected: nothing done for that job).
  Emits `added` then `waiting` or `delayed` per job added, `duplicated` per id taken, `deduplicated` (then
  `delayed` for a holder rescheduled).
]]
local rcall = redis.call
local q = {
  wait = KEYS[1], delayed = KEYS[2], marker = KEYS[3], meta = KEYS[4], events = KEYS[5], listened = KEYS[6], prioritized = KEYS[7],
}
local F = string.byte(ARGV[1]) - 48
local distinct = #ARGV[1] > 1
-- @include now
-- @include events
-- @include deduplicate
-- score.lua's step between members of one millisecond and enter.lua's priority scale: add-7 files its lines
-- itself, and the functions of those includes would be made on every call for nothing.
local SCORE_STEP = 1 / 4096
local PRIORITY_SCALE = 4294967296

-- The options' letters (ARGV above), by their byte ('a' is 97), and the job hash's field for each (made
-- only for a call that sends options).
local OPTION_FIELDS = F > 2 and {
  [97] = 'attempts', [100] = 'delay', [98] = 'backoff', [107] = 'keep', [102] = 'keepFailed', [108] = 'keepLogs', [112] = 'priority',
  [111] = 'lifo', [115] = 'stackTraceLimit',
}
local DELAY, PRIORITY, LIFO = 100, 112, 111

local now = nowMs()
-- Numbers are formatted here, as integers where they are: Lua formats a number it passes to Redis with
-- printf's '%.17g', the largest cost of a delayed add before.
local nowText = string.format('%d', now)
local n = (#ARGV - 1) / F
local codes = {}
local D = F == 4
-- A job's key is <prefix>:{q}:<id>: its id starts after the length of `wait`'s key less 'wait'.
local base = #KEYS[1] - 4
-- The codes as the reply gives them (a list of numbers with F = 4, else characters of one string).
local ADDED, TAKEN = 1, 0
if not D then
  ADDED, TAKEN = '1', '0'
end
-- The id of a next job a finish has named (keepLastIfActive, lua/includes/nextJob.lua): rare, made when needed.
local function claimedId(stored)
  -- @include nextSpec
  return decodeNext(stored)
end
-- Whether anyone listens, once: the emits below are then skipped without a call.
local listened = listening(q)

-- The call's jobs go into their lines together, a command a line rather than one a job: `back` and
-- `front` of `wait`, `ranked` (priority, id in turn) for `prioritized`, `later` (score, id) for `delayed`.
-- Each end of `wait` is pushed in the order the jobs came, so the lines end as one push a job left them.
-- All but `back` made when first needed: an empty table costs a call an allocation and its collection.
local back, front, ranked, later = {}, nil, nil, nil
-- The earliest due time of the delayed jobs not yet filed, and the last score given per due time (see
-- score.lua: jobs due in one millisecond in the order they came): `delayed` is read once per due time.
local earliest
local lastAt
local lastDue, lastDueText
local lined = false

local function delayedScore(due, dueText)
  lastAt = lastAt or {}
  local last = lastAt[due]
  if last == nil then
    last = tonumber(rcall('ZREVRANGEBYSCORE', q.delayed, '(' .. string.format('%d', due + 1), dueText, 'WITHSCORES', 'LIMIT', '0', '1')[2])
      or false
  end
  local score = due
  if last then
    score = math.min(last + SCORE_STEP, due + 1 - SCORE_STEP)
  end
  lastAt[due] = score
  if score == due then
    return dueText
  end
  -- The fraction k / 4096 written exactly (k * 244140625 / 10^12) with integer formatting.
  local k = (score - due) * 4096
  if k == math.floor(k) then
    return dueText .. string.format('.%012d', k * 244140625)
  end
  return string.format('%.17g', score)
end

-- `command` on `key` with the arguments in `list`, in slices (unpack's C stack holds some 8,000 values).
local function each(command, key, list)
  for i = 1, #list, 1000 do
    rcall(command, key, unpack(list, i, math.min(i + 999, #list)))
  end
end

-- ZADD of a batch's (score, member) `list` in slices. A batch of 16 members or more goes in behind a long
-- member (removed at once): Redis then keeps the set as a skiplist, where a listpack (a set under 128
-- members, as `delayed` and `prioritized` often are while workers keep up) is scanned for each member
-- added (lua/includes/skiplist.lua says more).
local function zaddEach(key, list)
  if #list < 32 then
    return each('ZADD', key, list)
  end
  local long = string.rep('~', 256)
  rcall('ZADD', key, '0', long, unpack(list, 1, math.min(1000, #list)))
  rcall('ZREM', key, long)
  for i = 1001, #list, 1000 do
    rcall('ZADD', key, unpack(list, i, math.min(i + 999, #list)))
  end
end

-- Files the jobs gathered so far into their lines; the marker is told once per call, after the loop.
local function file()
  if #back > 0 then
    each('LPUSH', q.wait, back)
    back = {}
  end
  if front then
    each('RPUSH', q.wait, front)
    front = nil
  end
  if ranked then
    -- The counter moves as it would one job at a time (prioritizedScore): the same scores.
    local count = #ranked / 2
    local seq = rcall('HINCRBY', q.meta, 'pc', string.format('%d', count)) - count
    for j = 1, #ranked, 2 do
      seq = seq + 1
      ranked[j] = string.format('%d', ranked[j] * PRIORITY_SCALE + seq % PRIORITY_SCALE)
    end
    zaddEach(q.prioritized, ranked)
    ranked = nil
  end
  if later then
    -- The marker learns of a due time only when it is now the first (see enterDelayed).
    local first = rcall('ZRANGE', q.delayed, '0', '0', 'WITHSCORES')[2]
    zaddEach(q.delayed, later)
    if not first or earliest < tonumber(first) then
      rcall('ZADD', q.marker, 'LT', string.format('%d', earliest), 'd')
    end
    later = nil
    earliest = nil
  end
end

-- The deduplicated jobs' specs, by their place among them (parseDeduplication), their meta fields and keys.
local m = 0
local dTtl, dExtend, dReplace, dReschedule, dKeepLast, dExpected, dDeid, dField, dKey
local parseDeduplication, readHolds, deduplicate, writeHolds
local anyReschedule = false
if D then
  parseDeduplication, readHolds, deduplicate, writeHolds = deduplication()
  dTtl, dExtend, dReplace, dReschedule, dKeepLast, dExpected, dDeid, dField, dKey = {}, {}, {}, {}, {}, {}, {}, {}, {}
  for i = 1, n do
    local spec = ARGV[F * i + 1]
    if spec ~= '' then
      m = m + 1
      local ttl, extend, replace, reschedule, keepLast, expected, deid = parseDeduplication(spec)
      dTtl[m], dExtend[m], dReplace[m], dExpected[m], dDeid[m], dField[m] = ttl, extend, replace, expected, deid, 'de:' .. deid
      dReschedule[m], dKeepLast[m] = reschedule, keepLast
      anyReschedule = anyReschedule or reschedule
      dKey[m] = KEYS[7 + n + m]
    end
  end
end

-- Which of the jobs' keys exist, and of their deduplications' keys, in one EXISTS for the call (a job a
-- command before). None (the usual case, and always for ids the Queue generated, unless the queue's id
-- counter was reset while its jobs remained): no job is taken, as the ids of a call are distinct, unless
-- the caller could not say so. All of them taken, distinct: none is added. Else each job is looked at.
local found = 0
for i = 8, 7 + n + m, 1000 do
  found = found + rcall('EXISTS', unpack(KEYS, i, math.min(i + 999, 7 + n + m)))
end
local holds
local keysHeld = 0
if m > 0 then
  holds = readHolds(q, dField, dKey, found > 0, file)
  -- deduplication's `reschedule`: a holder still delayed (perhaps one of this call's jobs: those before are
  -- filed first) is due `delayMs` from now, recorded as changeDelay-6.lua records it, and emits `delayed`.
  -- Made only for a call that asks it.
  holds.reschedule = anyReschedule and function(holderKey, holder, delayMs)
    file()
    rcall('ZREM', q.delayed, holder)
    local due = now + delayMs
    local dueText = string.format('%d', due)
    rcall('HSET', holderKey, 'dueAt', dueText, 'lastDelay', string.format('%d', delayMs))
    rcall('ZADD', q.delayed, delayedScore(due, dueText), holder)
    rcall('ZADD', q.marker, 'LT', dueText, 'd')
    emit(q, 'delayed', 'jobId', holder, 'delay', dueText)
  end
  for j = 1, m do
    if holds.key[j] then
      keysHeld = keysHeld + 1
    end
  end
end
local existing = found - keysHeld
local allTaken = distinct and existing == n
local lookEach = existing > 0 and not allTaken or not distinct

-- The jobs' keys: KEYS[7 + i] job i's; the j-th deduplicated job's key KEYS[7 + n + j]; then the holders'.
local dj = 0
local hk = 8 + n + m
-- Option fields, the deduplication id and the state of the job at hand, after name, data and createdOn.
local extra = F > 2 and {}
for i = 1, n do
  local a = 1 + F * (i - 1)
  local jobKey = KEYS[7 + i]
  local id, name, data = string.sub(jobKey, base + 1), ARGV[a + 1], ARGV[a + 2]
  local code, deid, dedupKey, holderKey, holderLogsKey
  local j
  if D and ARGV[a + 4] ~= '' then
    dj = dj + 1
    j = dj
    dedupKey = dKey[j]
    if dExpected[j] ~= '' then
      holderKey = KEYS[hk]
      hk = hk + 1
      if dReplace[j] then
        holderLogsKey = KEYS[hk]
        hk = hk + 1
      end
    end
  end
  if allTaken or lookEach and rcall('EXISTS', jobKey) == 1 then
    code = TAKEN
    if listened then
      emit(q, 'duplicated', 'jobId', id)
    end
  elseif j then
    -- The new job's delay ('d' among its options), which a reschedule gives the holder.
    local delayMs = dReschedule[j] and (tonumber(string.match(';' .. ARGV[a + 3], ';d(%d+)')) or 0)
    local asNext
    code, deid, asNext = deduplicate(q, holds, j, dField[j], dedupKey, holderKey, holderLogsKey, id, dTtl[j], dExtend[j], dReplace[j],
      dReschedule[j], dKeepLast[j], delayMs, dExpected[j], dDeid[j])
    if asNext then
      -- keepLastIfActive, its holder running: this job is the id's next (lua/includes/nextJob.lua), replacing one
      -- stored before.
      -- meta's `nexts`: from now on the queue's finishes ask meta for the next job of a job's deduplication id.
      -- A next job the holder's finish has named ("*", claimed: its worker sends its key) keeps that id, so
      -- the finish that sends it adds this add's job under it (nextJob.lua).
      local nextId, claim = id, ''
      local stored = rcall('HGET', q.meta, 'dn:' .. dDeid[j])
      if stored and string.byte(stored) == 42 then
        nextId, claim = claimedId(stored), '*'
      end
      local spec = claim .. string.format('%d,%d,%d,', #nextId, #name, #data) .. nextId .. name .. data .. ARGV[a + 3]
      rcall('HSET', q.meta, 'dn:' .. dDeid[j], spec, 'nexts', '1')
    end
  end
  if code == nil then
    code = ADDED
    local delayMs, priority, lifo = 0, 0, false
    local e = 0
    local options = F > 2 and ARGV[a + 3] or ''
    if options ~= '' then
      -- "<letter><value>;..." read with plain finds: a pattern costs several times as much.
      local pos, len = 1, #options
      while pos <= len do
        local stop = string.find(options, ';', pos, true) or len + 1
        local letter = string.byte(options, pos)
        local value = string.sub(options, pos + 1, stop - 1)
        extra[e + 1] = OPTION_FIELDS[letter] or error('add-7: no option ' .. string.char(letter))
        extra[e + 2] = value
        e = e + 2
        if letter == DELAY then
          delayMs = tonumber(value)
        elseif letter == PRIORITY then
          priority = tonumber(value)
        elseif letter == LIFO then
          lifo = true
        end
        pos = stop + 1
      end
    end
    if deid then
      extra[e + 1] = 'deid'
      extra[e + 2] = deid
      e = e + 2
    end
    if delayMs > 0 then
      local due = now + delayMs
      -- Jobs of a call mostly share their delay: its due time is formatted once.
      if due ~= lastDue then
        lastDue, lastDueText = due, string.format('%d', due)
      end
      local dueText = lastDueText
      -- The state goes in with the job: one HSET a job.
      extra[e + 1], extra[e + 2], extra[e + 3], extra[e + 4] = 'state', 'delayed', 'dueAt', dueText
      rcall('HSET', jobKey, 'name', name, 'data', data, 'createdOn', nowText, unpack(extra, 1, e + 4))
      later = later or {}
      later[#later + 1] = delayedScore(due, dueText)
      later[#later + 1] = id
      if not earliest or due < earliest then
        earliest = due
      end
      if listened then
        emit(q, 'added', 'jobId', id, 'name', name)
        emit(q, 'delayed', 'jobId', id, 'delay', dueText)
      end
    else
      local state = priority > 0 and 'prioritized' or 'wait'
      if e == 0 then
        rcall('HSET', jobKey, 'name', name, 'data', data, 'createdOn', nowText, 'state', state)
      else
        extra[e + 1], extra[e + 2] = 'state', state
        rcall('HSET', jobKey, 'name', name, 'data', data, 'createdOn', nowText, unpack(extra, 1, e + 2))
      end
      if priority > 0 then
        ranked = ranked or {}
        ranked[#ranked + 1] = priority
        ranked[#ranked + 1] = id
      elseif lifo then
        front = front or {}
        front[#front + 1] = id
      else
        back[#back + 1] = id
      end
      lined = true
      if listened then
        emit(q, 'added', 'jobId', id, 'name', name)
        emit(q, 'waiting', 'jobId', id)
      end
    end
  end
  codes[i] = code
end
file()
if holds then
  writeHolds(q, holds)
end
if lined then
  rcall('ZADD', q.marker, '0', '0')
end
if D then
  return { now, codes }
end
-- One character a job: a reply's integer costs four bytes.
return { now, table.concat(codes) }
