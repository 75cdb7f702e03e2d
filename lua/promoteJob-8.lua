--[[
  Promotes one delayed job now, due or not: an operator's "run it now" (queue.promoteJob, the dashboard's
  Promote). The job leaves `delayed` for the back of `wait` (a job with a priority: behind its equals in
  `prioritized`), as a due promotion does (promote-7.lua, which moves only due jobs). A job that is not
  delayed (promoted, taken or removed meanwhile) is left as it is. A scheduler's iteration is promoted by
  iterate-11.lua instead, which makes the next one.
  The marker keeps its due time: a worker that wakes for it finds nothing due and waits for the next one.

  KEYS[1] job       HASH   <prefix>:{q}:<id>
  KEYS[2] delayed   ZSET   <prefix>:{q}:delayed (id -> due time, ms)
  KEYS[3] wait      LIST   <prefix>:{q}:wait
  KEYS[4] marker    ZSET   <prefix>:{q}:marker
  KEYS[5] meta      HASH   <prefix>:{q}:meta
  KEYS[6] events    STREAM <prefix>:{q}:events
  KEYS[7] listened  ZSET   <prefix>:{q}:listened
  KEYS[8] prioritized ZSET <prefix>:{q}:prioritized

  ARGV[1] the job's id

  Returns { "ok" } when promoted, else { "not-delayed", the job's state or "missing" }. Emits `waiting`
  (prev `delayed`), as BullMQ's promote does.
]]
local rcall = redis.call
local jobKey, id = KEYS[1], ARGV[1]
local q = {
  delayed = KEYS[2], wait = KEYS[3], marker = KEYS[4], meta = KEYS[5], events = KEYS[6], listened = KEYS[7], prioritized = KEYS[8],
}
-- @include now
-- @include events
-- @include score
-- @include enter

if rcall('ZREM', q.delayed, id) == 0 then
  return { 'not-delayed', rcall('HGET', jobKey, 'state') or 'missing' }
end
-- As promote-7.lua: the due time stays (read only while delayed), a delay of its own goes.
local f = rcall('HMGET', jobKey, 'priority', 'lastDelay')
if f[2] then
  rcall('HDEL', jobKey, 'lastDelay')
end
enterWait(jobKey, q, id, string.format('%d', nowMs()), false, tonumber(f[1]) or 0)
emit(q, 'waiting', 'jobId', id, 'prev', 'delayed')
return { 'ok' }
