--[[
  Ends a worker's run of a job, fenced by its token: a worker that no longer owns the job (the job was
  recovered, or another worker now holds it) changes nothing. In the same call the worker may take its
  next jobs (candidates it read earlier, re-checked as in take-3.lua) and peek at the tail of `wait` for
  the call after, so a busy worker needs one round trip per job.

  KEYS[1] job        HASH   <prefix>:{q}:<id>
  KEYS[2] lease      STRING <prefix>:{q}:<id>:lock
  KEYS[3] active     ZSET   <prefix>:{q}:active
  KEYS[4] stalled    ZSET   <prefix>:{q}:stalled
  KEYS[5] wait       LIST   <prefix>:{q}:wait
  KEYS[6] completed  ZSET   <prefix>:{q}:completed
  KEYS[7] failed     ZSET   <prefix>:{q}:failed
  KEYS[8] marker     ZSET   <prefix>:{q}:marker
  KEYS[9 + 2i]       HASH   candidate job i to take next   (i = 0 .. n-1)
  KEYS[10 + 2i]      STRING lease of candidate job i

  ARGV[1] job id
  ARGV[2] token of the run
  ARGV[3] action: "complete" | "fail" (uses an attempt) | "release" (back to wait, no attempt used)
  ARGV[4] return value (JSON text) for complete, error message for fail, unused for release
  ARGV[5] worker token, for the jobs taken next
  ARGV[6] lease duration (ms), for the jobs taken next
  ARGV[7] how many ids to peek at from the tail of `wait` (0 for none)
  ARGV[8..] candidate job ids to take next, in the order of their KEYS pairs

  Returns { "ok", new state, taken, peeked ids } or { "lost", current state, {}, {} }; taken is
  { { id, token, { job hash } }, ... } as in take-3.lua.
]]
local rcall = redis.call
local jobKey, lockKey, activeKey, stalledKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local waitKey, completedKey, failedKey, markerKey = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local id, token, action, value = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local workerToken, leaseMs, peek = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local candidates = { firstKey = 9, firstArg = 8, count = #ARGV - 7 }
-- @include now
-- @include leaveActive
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
    return { 'ok', rcall('HGET', jobKey, 'finishedAs'), takeJobs(waitKey, activeKey, markerKey, workerToken, leaseMs, nowMs(), candidates), {} }
  end
  return { 'lost', rcall('HGET', jobKey, 'state') or 'missing', {}, {} }
end

local now = nowMs()
local state
leaveActive(jobKey, lockKey, activeKey, stalledKey, id)
if action == 'complete' then
  rcall('HINCRBY', jobKey, 'attemptsMade', 1)
  rcall('HSET', jobKey, 'state', 'completed', 'returnValue', value, 'finishedOn', now)
  rcall('ZADD', completedKey, now, id)
  state = 'completed'
elseif action == 'fail' then
  state = useAttempt(jobKey, waitKey, failedKey, markerKey, id, now, value, false)
else
  -- release: the worker is shutting down; the job is served next and keeps its attempt.
  rcall('HSET', jobKey, 'state', 'wait')
  rcall('RPUSH', waitKey, id)
  rcall('ZADD', markerKey, 0, '0')
  state = 'wait'
end
rcall('HSET', jobKey, 'finishedBy', token, 'finishedAs', state)
local taken = takeJobs(waitKey, activeKey, markerKey, workerToken, leaseMs, now, candidates)
local peeked = peek > 0 and rcall('LRANGE', waitKey, -peek, -1) or {}
return { 'ok', state, taken, peeked }
