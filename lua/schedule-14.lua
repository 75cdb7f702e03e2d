--[[
  Creates or changes a job scheduler (queue.upsertJobScheduler) and its first iteration, atomically. The
  caller read the scheduler's pending iteration (its due time in `schedulers`) and passes it: when
  another upsert moved it meanwhile, nothing changes and the caller tries again. A pending iteration not
  started yet is replaced by the new schedule's first (or, when the timing is unchanged, kept with the new
  template: upserting the same schedule again never duplicates a run). A first iteration due at once goes
  straight into line, with its next one made as iterate-11.lua would.

  KEYS[1]  schedulers   ZSET   <prefix>:{q}:schedulers
  KEYS[2]  scheduler    HASH   <prefix>:{q}:schedulers:<sid>
  KEYS[3]  delayed      ZSET   <prefix>:{q}:delayed
  KEYS[4]  wait         LIST   <prefix>:{q}:wait
  KEYS[5]  marker       ZSET   <prefix>:{q}:marker
  KEYS[6]  meta         HASH   <prefix>:{q}:meta
  KEYS[7]  events       STREAM <prefix>:{q}:events
  KEYS[8]  listened     STRING <prefix>:{q}:listened
  KEYS[9]  prioritized  ZSET   <prefix>:{q}:prioritized
  KEYS[10] pending      HASH   the pending iteration read by the caller (the first's key when none)
  KEYS[11] pending log  LIST   its log
  KEYS[12] first        HASH   the first iteration of the new schedule, <prefix>:{q}:repeat:<sid>:<due>
  KEYS[13] second       HASH   the iteration after it (made at once when the first is due at once)
  KEYS[14] reserved     ZSET   <prefix>:{q}:reserved

  ARGV[1] scheduler id
  ARGV[2] the pending iteration's due time the caller read ("" when the scheduler did not exist)
  ARGV[3] the pending iteration's id ("" for none)
  ARGV[4] the first iteration's due time (ms)
  ARGV[5] the first iteration's id
  ARGV[6] the second iteration's due time (ms; -1: none, the schedule ends after the first)
  ARGV[7] the second iteration's id ("" for none)
  ARGV[8] "keep" to keep a pending iteration whose due time is the first's (the timing is unchanged)
  ARGV[9..] the scheduler's fields, name and value in turn (its timing and its jobs' template)

  Returns { "retry" } or { "ok", the first iteration's id, now (ms) }. Emits `removed` for a pending
  iteration replaced, `added` and `delayed` for an iteration made, `waiting` for one due at once.
]]
local rcall = redis.call
local q = {
  schedulers = KEYS[1], delayed = KEYS[3], wait = KEYS[4], marker = KEYS[5], meta = KEYS[6], events = KEYS[7], listened = KEYS[8],
  prioritized = KEYS[9], reserved = KEYS[14],
}
local schedulerKey, pendingKey, pendingLogs, firstKey, secondKey = KEYS[2], KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local sid, readDue, pendingId = ARGV[1], ARGV[2], ARGV[3]
local firstDue, firstId, secondDue, secondId = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6]), ARGV[7]
-- @include now
-- @include events
-- @include score
-- @include enter
-- @include iteration

local at = rcall('ZSCORE', q.schedulers, sid)
if (at and string.format('%.0f', tonumber(at)) or '') ~= readDue then
  return { 'retry' }
end
local now = nowMs()
local ic = tonumber(rcall('HGET', schedulerKey, 'ic')) or 0
rcall('DEL', schedulerKey)
rcall('HSET', schedulerKey, unpack(ARGV, 9))

local keep = pendingId ~= '' and pendingId == firstId and ARGV[8] == 'keep'
if pendingId ~= '' and not keep then
  -- Replaced: removed if it has not started (a started one is a job like any other, left to its worker).
  local state = rcall('HGET', pendingKey, 'state')
  local removed = false
  if state == 'delayed' then
    removed = rcall('ZREM', q.delayed, pendingId) == 1
  elseif state == 'wait' then
    removed = rcall('ZREM', q.reserved, pendingId) == 1 or rcall('LREM', q.wait, 0, pendingId) > 0
  elseif state == 'prioritized' then
    removed = rcall('ZREM', q.reserved, pendingId) == 1 or rcall('ZREM', q.prioritized, pendingId) == 1
  end
  if removed then
    rcall('UNLINK', pendingKey, pendingLogs)
    emit(q, 'removed', 'jobId', pendingId, 'prev', state)
  end
end

if keep then
  -- The timing is unchanged: the pending iteration stays, with the new template if it has not started.
  local state = rcall('HGET', firstKey, 'state')
  if state == 'delayed' or state == 'wait' or state == 'prioritized' then
    local t = rcall('HMGET', schedulerKey, unpack(TEMPLATE))
    for i, name in ipairs(TEMPLATE) do
      if t[i] then
        rcall('HSET', firstKey, name, t[i])
      else
        rcall('HDEL', firstKey, name)
      end
    end
  end
  rcall('HSET', schedulerKey, 'ic', math.max(ic, 1))
  rcall('ZADD', q.schedulers, string.format('%.0f', firstDue), sid)
  return { 'ok', firstId, now }
end

if createIteration(schedulerKey, firstKey, q, sid, firstId, firstDue, now) then
  ic = ic + 1
end
local pending = firstDue
if firstDue <= now then
  -- Due at once (an every schedule's first run): into line now, its next one made.
  promoteIteration(firstKey, q, firstId, now)
  if secondDue >= 0 then
    if createIteration(schedulerKey, secondKey, q, sid, secondId, secondDue, now) then
      ic = ic + 1
    end
    pending = secondDue
  else
    pending = nil
  end
end
if pending then
  rcall('HSET', schedulerKey, 'ic', ic)
  rcall('ZADD', q.schedulers, string.format('%.0f', pending), sid)
else
  rcall('ZREM', q.schedulers, sid)
  rcall('DEL', schedulerKey)
end
return { 'ok', firstId, now }
