--[[
  Reschedules a delayed job to run `delay` ms from now (BullMQ's job.changeDelay(delay)), whatever it was
  due at: a delayed add, or a retry waiting its backoff. The job keeps its place among the jobs due in the
  same millisecond as an add would take it (score.lua). The delay is kept in the job's `lastDelay` field
  (BullMQ writes its `delay` field; EchoMQ's `delay` is the add's option, job.opts.delay, which BullMQ
  leaves as added): job.delay reads it while the job is delayed. A job moved later than a worker's marker
  leaves the marker early: the worker that wakes for it finds nothing due and learns the next due time.

  KEYS[1] job       HASH   <prefix>:{q}:<id>
  KEYS[2] delayed   ZSET   <prefix>:{q}:delayed (id -> due time, ms)
  KEYS[3] marker    ZSET   <prefix>:{q}:marker
  KEYS[4] meta      HASH   <prefix>:{q}:meta
  KEYS[5] events    STREAM <prefix>:{q}:events
  KEYS[6] listened  ZSET   <prefix>:{q}:listened

  ARGV[1] the job's id
  ARGV[2] the new delay (ms from now, by Redis's clock)

  Returns { "ok", due } (ms since the epoch), or { "not-delayed", the job's state or "missing" }: nothing
  changes then. Emits `delayed` ({ jobId, delay: due }), as BullMQ does.
]]
local rcall = redis.call
local jobKey, id, delay = KEYS[1], ARGV[1], tonumber(ARGV[2])
local q = { delayed = KEYS[2], marker = KEYS[3], meta = KEYS[4], events = KEYS[5], listened = KEYS[6] }
-- @include now
-- @include events
-- @include score
-- @include enter

if rcall('ZREM', q.delayed, id) == 0 then
  return { 'not-delayed', rcall('HGET', jobKey, 'state') or 'missing' }
end
local due = nowMs() + delay
enterDelayed(jobKey, q, id, due)
rcall('HSET', jobKey, 'lastDelay', delay)
emit(q, 'delayed', 'jobId', id, 'delay', due)
return { 'ok', due }
