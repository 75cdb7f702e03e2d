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
  With F = 4 (a call with deduplicated jobs, see deduplicate.lua), after the queue's keys, per job in turn:
  its HASH; with a deduplication, its deduplication key STRING <prefix>:{q}:de:<id>; and when the caller
  expects a holder of that id, the holder's HASH and LIST (logs)

  ARGV[1] fields per job (F): 2 when every job of the call has the default options, 3 with their options,
    4 with also their deduplication
  ARGV[2 + F(i-1) .. 1 + F i], for job i (its id is its key's last part: <prefix>:{q}:<id>, not sent again):
    name; data (JSON text); with F >= 3 its options: those not at their default, each a letter and the
    value as the job hash stores it, joined by ';' ("" for none; letters: OPTION_FIELDS below; values:
    attempts, the total starts allowed; delay, ms; backoff, "<type>,<delay>,<maxDelay>,<jitter>", see
    backoff.lua; keep and keepFailed, the retention in `completed` and `failed`, "<count>,<ageMs>" or "0"
    to remove at once, see retention.lua; keepLogs, lines; priority, 1 = highest .. 2^21 - 1; lifo, "1" to
    the front of `wait`; stackTraceLimit); with F = 4 its deduplication ("<ttl>,<extend>,<replace>,<n>,<holder
    expected, n bytes><id>", see deduplicate.lua; "" for none)
  `delay` and `lifo` are stored when given (for job.opts), not read by any script.
  The caller leaves out an option at its default (lib/redis/job-codec.ts): the scripts read an absent field
  as its default, so a job with the defaults costs no byte for them, here or in its hash.

  Returns { now (ms, Redis's clock), codes }: codes one character a job, '1' added or '0' its id was taken;
  with F = 4 a list instead, per job 1, 0, the holder's id (deduplicated) or '?<holder>' (not the holder
  the caller expected: nothing done for that job).
  Emits `added` then `waiting` or `delayed` per job added, `duplicated` per id taken, `deduplicated`.
]]
local rcall = redis.call
local q = {
  wait = KEYS[1], delayed = KEYS[2], marker = KEYS[3], meta = KEYS[4], events = KEYS[5], listened = KEYS[6], prioritized = KEYS[7],
}
local F = tonumber(ARGV[1])
-- @include now
-- @include events
-- @include score
-- @include enter
-- @include deduplicate

-- The options' letters (ARGV above), and the job hash's field for each.
local OPTION_FIELDS = {
  a = 'attempts', d = 'delay', b = 'backoff', k = 'keep', f = 'keepFailed', l = 'keepLogs', p = 'priority', o = 'lifo',
  s = 'stackTraceLimit',
}

local now = nowMs()
-- Numbers are formatted here, as integers where they are: Lua formats a number it passes to Redis with
-- printf's '%.17g', the largest cost of a delayed add before.
local nowText = string.format('%d', now)
local codes = {}
local D = F == 4
-- A job's key is <prefix>:{q}:<id>: its id starts after the length of `wait`'s key less 'wait'.
local base = #KEYS[1] - 4
-- The codes as the reply gives them (a list of numbers with F = 4, else characters of one string).
local ADDED, TAKEN = 1, 0
if not D then
  ADDED, TAKEN = '1', '0'
end

-- The call's jobs go into their lines together, a command a line rather than one a job: `back` and
-- `front` of `wait`, `ranked` (priority, id in turn) for `prioritized`, `later` (score, id) for `delayed`.
-- Each end of `wait` is pushed in the order the jobs came, so the lines end as one push a job left them.
local back, front, ranked, later = {}, {}, {}, {}
-- The earliest due time of the delayed jobs not yet filed, and the last score given per due time (see
-- score.lua: jobs due in one millisecond in the order they came): `delayed` is read once per due time.
local earliest
local lastAt = {}
local lined = false

local function delayedScore(due, dueText)
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

-- Files the jobs gathered so far into their lines; the marker is told once per call, after the loop.
local function file()
  if #back > 0 then
    each('LPUSH', q.wait, back)
    back = {}
  end
  if #front > 0 then
    each('RPUSH', q.wait, front)
    front = {}
  end
  if #ranked > 0 then
    -- The counter moves as it would one job at a time (prioritizedScore): the same scores.
    local n = #ranked / 2
    local seq = rcall('HINCRBY', q.meta, 'pc', string.format('%d', n)) - n
    for j = 1, #ranked, 2 do
      seq = seq + 1
      ranked[j] = string.format('%d', ranked[j] * PRIORITY_SCALE + seq % PRIORITY_SCALE)
    end
    each('ZADD', q.prioritized, ranked)
    ranked = {}
  end
  if #later > 0 then
    -- The marker learns of a due time only when it is now the first (see enterDelayed).
    local first = rcall('ZRANGE', q.delayed, '0', '0', 'WITHSCORES')[2]
    each('ZADD', q.delayed, later)
    if not first or earliest < tonumber(first) then
      rcall('ZADD', q.marker, 'LT', string.format('%d', earliest), 'd')
    end
    later = {}
    earliest = nil
  end
end

-- The next job's first key.
local k = 8
for i = 1, (#ARGV - 1) / F do
  local a = 1 + F * (i - 1)
  local jobKey = KEYS[k]
  local id, name, data = string.sub(jobKey, base + 1), ARGV[a + 1], ARGV[a + 2]
  local held, deid, spec, dedupKey, holderKey, holderLogsKey
  k = k + 1
  if D and ARGV[a + 4] ~= '' then
    spec = ARGV[a + 4]
    dedupKey = KEYS[k]
    k = k + 1
    if expectedHolder(spec) ~= '' then
      holderKey, holderLogsKey = KEYS[k], KEYS[k + 1]
      k = k + 2
    end
  end
  if rcall('EXISTS', jobKey) == 1 then
    codes[i] = TAKEN
    emit(q, 'duplicated', 'jobId', id)
  elseif spec then
    -- A replaced holder leaves its line: the jobs before this one must be in theirs.
    file()
    held, deid = deduplicate(q, dedupKey, holderKey, holderLogsKey, id, spec)
    codes[i] = held
  end
  if codes[i] == nil then
    codes[i] = ADDED
    local fields = { 'name', name, 'data', data, 'createdOn', nowText }
    local delayMs, priority, lifo = 0, 0, false
    if F > 2 and ARGV[a + 3] ~= '' then
      for letter, value in string.gmatch(ARGV[a + 3], '(%a)([^;]*)') do
        fields[#fields + 1] = OPTION_FIELDS[letter] or error('add-7: no option ' .. letter)
        fields[#fields + 1] = value
        if letter == 'd' then
          delayMs = tonumber(value)
        elseif letter == 'p' then
          priority = tonumber(value)
        elseif letter == 'o' then
          lifo = true
        end
      end
    end
    if deid then
      fields[#fields + 1] = 'deid'
      fields[#fields + 1] = deid
    end
    if delayMs > 0 then
      local due = now + delayMs
      local dueText = string.format('%d', due)
      -- The state goes in with the job: one HSET a job.
      fields[#fields + 1] = 'state'
      fields[#fields + 1] = 'delayed'
      fields[#fields + 1] = 'dueAt'
      fields[#fields + 1] = dueText
      rcall('HSET', jobKey, unpack(fields))
      emit(q, 'added', 'jobId', id, 'name', name)
      later[#later + 1] = delayedScore(due, dueText)
      later[#later + 1] = id
      if not earliest or due < earliest then
        earliest = due
      end
      emit(q, 'delayed', 'jobId', id, 'delay', dueText)
    else
      fields[#fields + 1] = 'state'
      fields[#fields + 1] = priority > 0 and 'prioritized' or 'wait'
      rcall('HSET', jobKey, unpack(fields))
      emit(q, 'added', 'jobId', id, 'name', name)
      if priority > 0 then
        ranked[#ranked + 1] = priority
        ranked[#ranked + 1] = id
      elseif lifo then
        front[#front + 1] = id
      else
        back[#back + 1] = id
      end
      lined = true
      emit(q, 'waiting', 'jobId', id)
    end
  end
end
file()
if lined then
  rcall('ZADD', q.marker, '0', '0')
end
if D then
  return { now, codes }
end
-- One character a job: a reply's integer costs four bytes.
return { now, table.concat(codes) }
