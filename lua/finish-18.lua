--[[
  Ends a worker's run of a job, fenced by its token: a worker that no longer owns the job (the job was
  recovered, or another worker now holds it) changes nothing. In the same call the worker takes its next
  jobs (candidates it reserved or read earlier, re-checked as in take-11.lua) and reserves or peeks at the
  ids after them, so a busy worker needs one round trip per job.

  KEYS[1]  job        HASH   <prefix>:{q}:<id>
  KEYS[2]  lease      STRING <prefix>:{q}:<id>:lock
  KEYS[3]  active     ZSET   <prefix>:{q}:active
  KEYS[4]  stalled    ZSET   <prefix>:{q}:stalled
  KEYS[5]  wait       LIST   <prefix>:{q}:wait
  KEYS[6]  completed  ZSET   <prefix>:{q}:completed
  KEYS[7]  failed     ZSET   <prefix>:{q}:failed
  KEYS[8]  marker     ZSET   <prefix>:{q}:marker
  KEYS[9]  delayed    ZSET   <prefix>:{q}:delayed
  KEYS[10] meta       HASH   <prefix>:{q}:meta (failedNew count, retention limits)
  KEYS[11] reserved   ZSET   <prefix>:{q}:reserved (id -> reservation expiry, ms)
  KEYS[12] events     STREAM <prefix>:{q}:events
  KEYS[13] listened   STRING <prefix>:{q}:listened
  KEYS[14] logs       LIST   <prefix>:{q}:<id>:logs (removed with the job when its retention is "0")
  KEYS[15] metrics    HASH   <prefix>:{q}:metrics (finished jobs per minute, see minutes.lua)
  KEYS[16] prioritized     ZSET  <prefix>:{q}:prioritized
  KEYS[17] reservedScores  HASH  <prefix>:{q}:reservedScores (reserved id -> its score in prioritized)
  KEYS[18] limiter         ZSET  <prefix>:{q}:limiter (run token -> start time, ms)
  KEYS[19 + 2i]       HASH   candidate job i to take next   (i = 0 .. n-1)
  KEYS[20 + 2i]       STRING lease of candidate job i

  ARGV[1]  job id
  ARGV[2]  token of the run
  ARGV[3]  action: "complete" | "fail" (uses an attempt; a retry waits the job's backoff) | "fail-final"
           (an UnrecoverableError: to `failed` whatever attempts remain) | "release" (back to wait, served
           next, no attempt used: a closing worker's, or a RateLimitError's)
  ARGV[4]  return value (JSON text) for complete, error message for fail, unused for release
  ARGV[5]  a random number in [0, 1), for the backoff's jitter
  ARGV[6]  worker token, for the jobs taken next
  ARGV[7]  lease duration (ms), for the jobs taken next
  ARGV[8]  worker name, recorded on the jobs taken next
  ARGV[9]  most bytes of job data taken next (see takeJobs.lua)
  ARGV[10] "r" when the candidates are reserved by this worker, "w" when read from `wait`
  ARGV[11] how many ids to reserve from the tail of `wait` for the calls after (0 for none)
  ARGV[12] how long a reservation lasts (ms)
  ARGV[13] how many ids to peek at from the head of the line, without reserving them (0 for none)
  ARGV[14] the worker's limiter: most starts per window (0 for none)
  ARGV[15] the limiter's window (ms)
  ARGV[16] the error's stack for fail and fail-final (kept in the job's `stacktrace`, see useAttempt.lua), else ""
  ARGV[17..] candidate job ids to take next, in the order of their KEYS pairs

  Returns { "ok", new state, taken, reserved ids, peeked ids, set to trim, candidates left, ms until the
  earliest delayed job is due, its due time, when it finished (ms), ms to wait before taking again (0:
  none; -1: paused) } or { "lost", current state, {}, {}, {}, "", {}, -1, -1, 0, 0 }; peeked ids are next
  first;
  taken is { { id, token, { job fields } }, ... } as in take-11.lua; the set to trim is "completed" or
  "failed" when it has just grown past its retention by another `slack` jobs (the worker then runs
  trim-2.lua, see retention.lua), else ""; the due times are -1 when no job is delayed (nextDue.lua).
]]
local rcall = redis.call
local jobKey, lockKey, stalledKey = KEYS[1], KEYS[2], KEYS[4]
local q = {
  active = KEYS[3], wait = KEYS[5], completed = KEYS[6], failed = KEYS[7], marker = KEYS[8], delayed = KEYS[9],
  meta = KEYS[10], reserved = KEYS[11], events = KEYS[12], listened = KEYS[13], prioritized = KEYS[16], reservedScores = KEYS[17],
  limiter = KEYS[18],
}
local logsKey, metricsKey = KEYS[14], KEYS[15]
local id, token, action, value, roll = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local taker = {
  token = ARGV[6], leaseMs = ARGV[7], name = ARGV[8], maxBytes = tonumber(ARGV[9]), max = tonumber(ARGV[14]), duration = tonumber(ARGV[15]),
}
local reserve, reserveMs, peek = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
local stack = ARGV[16]
local candidates = { firstKey = 19, firstArg = 17, count = #ARGV - 16, reserved = ARGV[10] == 'r' }
-- @include now
-- @include starts
-- @include events
-- @include score
-- @include leaveActive
-- @include retention
-- @include enter
-- @include backoff
-- @include useAttempt
-- @include skiplist
-- @include takeJobs
-- @include nextDue
-- @include minutes

-- Ownership is the run's token on the job: a job holds a token only while it is in flight. A lapsed lease
-- that no sweep has recovered yet still belongs to this run; a lease held by another token never does.
-- A finish leaves its receipt in the same field: "=<token>" when the job ended (its state and finishedOn
-- say how and when), "=<token> <state> <ms>" when it went back in line; every other move out of `active`
-- (a sweep's recovery, an operator's retry) deletes the field. The receipt costs no field of its own.
local holder = rcall('GET', lockKey)
local job = rcall('HMGET', jobKey, 'token', 'attemptsMade', 'backoff', 'state', 'keep', 'keepFailed', 'finishedOn')
if not (job[1] == token and (holder == false or holder == token)) then
  -- A replay of this run's own finish (its reply was lost to a dropped connection): report what it did.
  local receipt = job[1] or ''
  local rest = string.sub(receipt, #token + 2)
  if string.sub(receipt, 1, #token + 1) == '=' .. token and (rest == '' or string.sub(rest, 1, 1) == ' ') then
    local doneState, doneAt = job[4], tonumber(job[7]) or 0
    if rest ~= '' then
      local sep = string.find(rest, ' ', 2, true)
      doneState, doneAt = string.sub(rest, 2, sep - 1), tonumber(string.sub(rest, sep + 1))
    end
    local taken, left, wait = takeJobs(q, taker, nowMs(), candidates)
    -- The ids the first call reserved are those still reserved until exactly its time plus the same
    -- reservation length. Another worker's finish in the same millisecond may share that score: handing
    -- its ids here only lets this worker take them first (a take re-checks each), never twice.
    local reservedBefore = {}
    if reserve > 0 and doneAt > 0 then
      local until_ = tostring(doneAt + reserveMs)
      reservedBefore = rcall('ZRANGEBYSCORE', q.reserved, until_, until_, 'LIMIT', 0, reserve)
    end
    return { 'ok', doneState, taken, reservedBefore, {}, '', left, -1, -1, doneAt, wait }
  end
  return { 'lost', job[4] or 'missing', {}, {}, {}, '', {}, -1, -1, 0, 0 }
end

local now = nowMs()
local nowText = tostring(now)
local made = (tonumber(job[2]) or 0) + 1
local state
leaveActive(lockKey, q.active, stalledKey, id)
if action == 'complete' then
  state = 'completed'
  rcall('HSET', jobKey, 'state', state, 'returnValue', value, 'finishedOn', nowText, 'attemptsMade', tostring(made), 'token', '=' .. token)
  emit(q, 'completed', 'jobId', id, 'returnvalue', value, 'prev', 'active')
else
  if action == 'release' then
    enterWait(jobKey, q, id, now, true)
    emit(q, 'waiting', 'jobId', id, 'prev', 'active')
    state = 'wait'
  else
    local retry = { front = false, final = action == 'fail-final', delayMs = backoffDelay(job[3], made, roll), stack = stack }
    state = useAttempt(jobKey, q, id, now, value, retry)
  end
  if state == 'failed' then
    rcall('HSET', jobKey, 'token', '=' .. token)
  else
    rcall('HSET', jobKey, 'token', '=' .. token .. ' ' .. state .. ' ' .. nowText)
  end
end
if state == 'completed' or state == 'failed' then
  countFinished(metricsKey, state, now)
end
-- Last, as it may remove the job at once (retention "0"; a lost reply to that finish reads as lost).
local trimSet = ''
if state == 'completed' then
  trimSet = fileFinished(jobKey, logsKey, q, state, id, now, job[5])
elseif state == 'failed' then
  trimSet = fileFinished(jobKey, logsKey, q, state, id, now, job[6])
end
local taken, left, wait = takeJobs(q, taker, now, candidates)
local reserved = reserveNext(q, taker, reserve, now + reserveMs)
-- The in-flight and reserved sets change by one member a job: kept skiplists (see skiplist.lua), checked
-- on one finish in sixteen, as a conversion lasts.
if roll < 0.0625 then
  keepSkiplist(q.active)
  keepSkiplist(q.reserved)
end
local peeked = peekNext(q, peek)
local dueIn, dueAt = nextDue(q.delayed, now)
-- As BullMQ: the queue ran dry with this finish (nothing taken next, nothing waiting, in flight or due
-- later, and not paused).
if #taken == 0 and action ~= 'release' and dueIn < 0 and listening(q) and rcall('LLEN', q.wait) == 0 and rcall('ZCARD', q.reserved) == 0
  and rcall('ZCARD', q.active) == 0 and rcall('ZCARD', q.prioritized) == 0 and rcall('HEXISTS', q.meta, 'paused') == 0 then
  emit(q, 'drained')
end
return { 'ok', state, taken, reserved, peeked, trimSet, left, dueIn, dueAt, now, wait }
