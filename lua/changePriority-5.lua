--[[
  Changes a job's priority (BullMQ's job.changePriority({ priority, lifo })). A job waiting in `wait` or
  `prioritized` is filed again at once under its new priority: behind its equals, or with lifo at the
  front of them (priority 0: the back of `wait`, or with lifo its front). A job in any other state (delayed,
  in flight, finished, reserved by a busy worker) keeps its place and runs with the new priority the next
  time it waits, as in BullMQ. No event, as in BullMQ.

  KEYS[1] job          HASH  <prefix>:{q}:<id>
  KEYS[2] wait         LIST  <prefix>:{q}:wait
  KEYS[3] prioritized  ZSET  <prefix>:{q}:prioritized (id -> priority * 2^32 + counter)
  KEYS[4] marker       ZSET  <prefix>:{q}:marker
  KEYS[5] meta         HASH  <prefix>:{q}:meta (the priority counter `pc`)

  ARGV[1] job id
  ARGV[2] the new priority (0: none, else 1 = highest .. 2^21 - 1)
  ARGV[3] lifo: "1" to the front of its equals, else ""

  Returns { "ok", state } or { "missing" } (nothing changed).
]]
local rcall = redis.call
local jobKey, id = KEYS[1], ARGV[1]
local q = { wait = KEYS[2], prioritized = KEYS[3], marker = KEYS[4], meta = KEYS[5] }
local priority, lifo = tonumber(ARGV[2]), ARGV[3] == '1'
-- @include now
-- @include score
-- @include enter

local state = rcall('HGET', jobKey, 'state')
if not state and rcall('EXISTS', jobKey) == 0 then
  return { 'missing' }
end
-- The hash stores no default: priority 0 is no field.
if priority > 0 then
  rcall('HSET', jobKey, 'priority', priority)
else
  rcall('HDEL', jobKey, 'priority')
end
if rcall('ZREM', q.prioritized, id) > 0 or rcall('LREM', q.wait, -1, id) > 0 then
  -- Filed again as a waiting job is; `fresh`, so when it joined the line (waitingSince) is kept.
  enterWait(jobKey, q, id, nowMs(), lifo, priority, true)
  state = priority > 0 and 'prioritized' or 'wait'
end
return { 'ok', state or 'wait' }
