--[[
  Removes a job scheduler (queue.removeJobScheduler) and its pending iteration, if that has not started
  (a started one is a job like any other, left to its worker). The caller read the pending iteration's
  due time; when an upsert or a promotion moved it meanwhile, nothing changes and the caller tries again.

  KEYS[1]  schedulers   ZSET   <prefix>:{q}:schedulers
  KEYS[2]  scheduler    HASH   <prefix>:{q}:schedulers:<sid>
  KEYS[3]  pending      HASH   the pending iteration
  KEYS[4]  pending log  LIST   its log
  KEYS[5]  delayed      ZSET   <prefix>:{q}:delayed
  KEYS[6]  wait         LIST   <prefix>:{q}:wait
  KEYS[7]  prioritized  ZSET   <prefix>:{q}:prioritized
  KEYS[8]  meta         HASH   <prefix>:{q}:meta
  KEYS[9]  events       STREAM <prefix>:{q}:events
  KEYS[10] listened     STRING <prefix>:{q}:listened

  ARGV[1] scheduler id
  ARGV[2] the pending iteration's due time the caller read
  ARGV[3] the pending iteration's id

  Returns 1 (removed), 0 (no such scheduler) or "retry". Emits `removed` for the pending iteration removed.
]]
local rcall = redis.call
local q = { meta = KEYS[8], events = KEYS[9], listened = KEYS[10] }
local schedulersKey, schedulerKey, pendingKey, pendingLogs = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local delayedKey, waitKey, prioritizedKey = KEYS[5], KEYS[6], KEYS[7]
local sid, readDue, pendingId = ARGV[1], ARGV[2], ARGV[3]
-- @include events

local at = rcall('ZSCORE', schedulersKey, sid)
if not at then
  rcall('DEL', schedulerKey)
  return 0
end
if string.format('%.0f', tonumber(at)) ~= readDue then
  return 'retry'
end
local state = rcall('HGET', pendingKey, 'state')
local removed = false
if state == 'delayed' then
  removed = rcall('ZREM', delayedKey, pendingId) == 1
elseif state == 'wait' then
  removed = rcall('LREM', waitKey, 0, pendingId) > 0
elseif state == 'prioritized' then
  removed = rcall('ZREM', prioritizedKey, pendingId) == 1
end
if removed then
  rcall('UNLINK', pendingKey, pendingLogs)
  emit(q, 'removed', 'jobId', pendingId, 'prev', state)
end
rcall('ZREM', schedulersKey, sid)
rcall('DEL', schedulerKey)
return 1
