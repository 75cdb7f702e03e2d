--[[
  Moves delayed jobs that are due to the back of `wait`, and says when the next one is due. The caller
  passes the ids with the earliest due times (ZRANGE on `delayed`); the script re-checks each one by
  Redis's clock, so a candidate not yet due, or promoted meanwhile, stays as it is.

  KEYS[1] delayed   ZSET   <prefix>:{q}:delayed (id -> due time, ms)
  KEYS[2] wait      LIST   <prefix>:{q}:wait
  KEYS[3] marker    ZSET   <prefix>:{q}:marker
  KEYS[4] meta      HASH   <prefix>:{q}:meta
  KEYS[5] events    STREAM <prefix>:{q}:events
  KEYS[6] listened  ZSET   <prefix>:{q}:listened
  KEYS[7] prioritized ZSET <prefix>:{q}:prioritized (a job with a priority goes there, behind its equals)
  KEYS[7 + i]       HASH   job i       (i = 1 .. n)

  ARGV[1] 1 to re-arm the marker for the next due time (a caller that will not wait for it itself,
          the sweep), else 0 (a worker, which sets its own timer from the reply)
  ARGV[1 + i] job id i

  Returns { promoted ids, ms until the next delayed job is due (-1 when none is left), its due time (ms,
  Redis's clock; -1 when none) }. Emits `waiting` (prev `delayed`) per job promoted.
]]
local rcall = redis.call
local q = {
  delayed = KEYS[1], wait = KEYS[2], marker = KEYS[3], meta = KEYS[4], events = KEYS[5], listened = KEYS[6], prioritized = KEYS[7],
}
local rearm = ARGV[1] == '1'
-- @include now
-- @include events
-- @include score
-- @include enter

local now = nowMs()
local promoted = {}
for i = 1, #ARGV - 1 do
  local id = ARGV[1 + i]
  local due = rcall('ZSCORE', q.delayed, id)
  if due and tonumber(due) <= now then
    rcall('ZREM', q.delayed, id)
    rcall('HDEL', KEYS[7 + i], 'dueAt', 'lastDelay')
    enterWait(KEYS[7 + i], q, id, now, false)
    emit(q, 'waiting', 'jobId', id, 'prev', 'delayed')
    promoted[#promoted + 1] = id
  end
end
local nextDue = rcall('ZRANGE', q.delayed, 0, 0, 'WITHSCORES')[2]
if nextDue and rearm then
  rcall('ZADD', q.marker, 'LT', nextDue, 'd')
end
if not nextDue then
  return { promoted, -1, -1 }
end
return { promoted, math.max(0, tonumber(nextDue) - now), tonumber(nextDue) }
