--[[
  Ends a worker's run of a job, fenced by its token: a worker that no longer owns the job (the job was
  recovered, or another worker now holds it) changes nothing. In the same call the worker may take its
  next jobs (candidates it read earlier, re-checked as in take-3.lua) and peek at the tail of `wait` for
  the call after, so a busy worker needs one round trip per job.

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
  KEYS[11 + 2i]       HASH   candidate job i to take next   (i = 0 .. n-1)
  KEYS[12 + 2i]       STRING lease of candidate job i

  ARGV[1]  job id
  ARGV[2]  token of the run
  ARGV[3]  action: "complete" | "fail" (uses an attempt; a retry waits the job's backoff) | "release"
           (back to wait, served next, no attempt used)
  ARGV[4]  return value (JSON text) for complete, error message for fail, unused for release
  ARGV[5]  a random number in [0, 1), for the backoff's jitter
  ARGV[6]  worker token, for the jobs taken next
  ARGV[7]  lease duration (ms), for the jobs taken next
  ARGV[8]  worker name, recorded on the jobs taken next
  ARGV[9]  most bytes of job data taken next (see takeJobs.lua)
  ARGV[10] how many ids to peek at from the tail of `wait` (0 for none)
  ARGV[11..] candidate job ids to take next, in the order of their KEYS pairs

  Returns { "ok", new state, taken, peeked ids, set to trim } or { "lost", current state, {}, {}, "" };
  taken is { { id, token, { job hash } }, ... } as in take-3.lua; the set to trim is "completed" or
  "failed" when it has grown past its retention plus slack (the worker then runs trim-2.lua), else "".
]]
local rcall = redis.call
local jobKey, lockKey, activeKey, stalledKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local q = { wait = KEYS[5], completed = KEYS[6], failed = KEYS[7], marker = KEYS[8], delayed = KEYS[9], meta = KEYS[10] }
local id, token, action, value, roll = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local taker = { token = ARGV[6], leaseMs = tonumber(ARGV[7]), name = ARGV[8], maxBytes = tonumber(ARGV[9]) }
local peek = tonumber(ARGV[10])
local candidates = { firstKey = 11, firstArg = 11, count = #ARGV - 10 }
-- @include now
-- @include leaveActive
-- @include retention
-- @include enter
-- @include backoff
-- @include useAttempt
-- @include takeJobs

-- Ownership is the run's token on the job, while the job is in flight. A lapsed lease that no sweep has
-- recovered yet still belongs to this run; a lease held by another token never does.
local holder = rcall('GET', lockKey)
local owned = rcall('ZSCORE', activeKey, id) and rcall('HGET', jobKey, 'token') == token
  and (holder == false or holder == token)
if not owned then
  -- A replay of this run's own finish (its reply was lost to a dropped connection): report what it did.
  if rcall('HGET', jobKey, 'finishedBy') == token then
    local taken = takeJobs(q.wait, activeKey, q.marker, taker, nowMs(), candidates)
    return { 'ok', rcall('HGET', jobKey, 'finishedAs'), taken, {}, '' }
  end
  return { 'lost', rcall('HGET', jobKey, 'state') or 'missing', {}, {}, '' }
end

local now = nowMs()
local state
leaveActive(jobKey, lockKey, activeKey, stalledKey, id)
if action == 'complete' then
  rcall('HINCRBY', jobKey, 'attemptsMade', 1)
  rcall('HSET', jobKey, 'state', 'completed', 'returnValue', value, 'finishedOn', now)
  state = 'completed'
elseif action == 'fail' then
  local made = tonumber(rcall('HGET', jobKey, 'attemptsMade')) or 0
  local delayMs = backoffDelay(rcall('HGET', jobKey, 'backoff'), made + 1, roll)
  state = useAttempt(jobKey, q, id, now, value, { front = false, delayMs = delayMs })
else
  enterWait(jobKey, q, id, now, true)
  state = 'wait'
end
rcall('HSET', jobKey, 'finishedBy', token, 'finishedAs', state)
-- Last, as it may remove the job at once (retention "0"; a lost reply to that finish reads as lost).
local trimSet = ''
if state == 'completed' or state == 'failed' then
  trimSet = fileFinished(jobKey, q, state, id, now)
end
local taken = takeJobs(q.wait, activeKey, q.marker, taker, now, candidates)
local peeked = peek > 0 and rcall('LRANGE', q.wait, -peek, -1) or {}
return { 'ok', state, taken, peeked, trimSet }
