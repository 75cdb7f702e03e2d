--[[
  Pauses or resumes a queue. While paused (meta's `paused`), no worker on any host takes a job (takes and
  finishes check it atomically, see takeJobs.lua) and none is reserved; adds, promotions of delayed jobs
  and the sweep's recoveries go on, into `wait`, for `resume`. Running jobs finish as usual.

  KEYS[1] meta      HASH   <prefix>:{q}:meta
  KEYS[2] marker    ZSET   <prefix>:{q}:marker
  KEYS[3] wait      LIST   <prefix>:{q}:wait
  KEYS[4] events    STREAM <prefix>:{q}:events
  KEYS[5] listened  ZSET   <prefix>:{q}:listened
  KEYS[6] prioritized ZSET <prefix>:{q}:prioritized

  ARGV[1] "pause" or "resume"

  Returns 1 when the state changed, 0 when the queue already was so. Emits `paused` or `resumed`.
]]
local rcall = redis.call
local q = { meta = KEYS[1], marker = KEYS[2], wait = KEYS[3], events = KEYS[4], listened = KEYS[5] }
-- @include events

local changed
if ARGV[1] == 'pause' then
  changed = rcall('HSET', q.meta, 'paused', 1)
  -- Idle workers need not wake for work they may not take; a due time ('d') still wakes one to promote.
  rcall('ZREM', q.marker, '0')
  emit(q, 'paused')
else
  changed = rcall('HDEL', q.meta, 'paused')
  if rcall('LLEN', q.wait) > 0 or rcall('ZCARD', KEYS[6]) > 0 then
    rcall('ZADD', q.marker, 0, '0')
  end
  emit(q, 'resumed')
end
return changed
