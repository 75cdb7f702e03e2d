--[[
  Creates or changes a job scheduler (queue.upsertJobScheduler) and its first run, atomically. The caller
  read the scheduler's next period and newest run and passes them: when another upsert or an advance
  (iterate-11.lua) moved them meanwhile, nothing changes and the caller tries again. The newest run, when
  no worker has started it (delayed, waiting, or reserved by a worker) and it joined no flow, is replaced by
  the new schedule's first; when the timing is unchanged it is kept, with the new template: upserting the
  same schedule again never duplicates a run. A first run due at once goes straight into line, and its next period is made
  when a worker starts it or when it falls due, as iterate-11.lua says.

  KEYS[1]  schedulers      ZSET   <prefix>:{q}:schedulers
  KEYS[2]  scheduler       HASH   <prefix>:{q}:schedulers:<sid>
  KEYS[3]  delayed         ZSET   <prefix>:{q}:delayed
  KEYS[4]  wait            LIST   <prefix>:{q}:wait
  KEYS[5]  marker          ZSET   <prefix>:{q}:marker
  KEYS[6]  meta            HASH   <prefix>:{q}:meta
  KEYS[7]  events          STREAM <prefix>:{q}:events
  KEYS[8]  listened        ZSET   <prefix>:{q}:listened
  KEYS[9]  prioritized     ZSET   <prefix>:{q}:prioritized
  KEYS[10] newest          HASH   the newest run read by the caller (the first's key when none)
  KEYS[11] newest log      LIST   its log
  KEYS[12] first           HASH   the first run of the new schedule, <prefix>:{q}:repeat:<sid>:<due>
  KEYS[13] reserved        ZSET   <prefix>:{q}:reserved
  KEYS[14] reservedScores  HASH   <prefix>:{q}:reservedScores

  ARGV[1] scheduler id
  ARGV[2] its next period the caller read ("" when the scheduler did not exist)
  ARGV[3] its newest run's due time the caller read ("" for none)
  ARGV[4] the newest run's id ("" for none)
  ARGV[5] the first run's due time (ms)
  ARGV[6] the first run's id
  ARGV[7] the period after the first (ms), when the first is due at once; -1: none (the schedule ends
          after the first)
  ARGV[8] "keep" to keep the newest run (the timing is unchanged)
  ARGV[9..] the scheduler's fields, name and value in turn (its timing and its jobs' template)

  Returns { "retry" } or { "ok", the id of the first run (the newest one when kept), now (ms) }. Emits
  `removed` for a run replaced, `added` and `delayed` or `waiting` for the first run.
]]
local rcall = redis.call
local q = {
  schedulers = KEYS[1], delayed = KEYS[3], wait = KEYS[4], marker = KEYS[5], meta = KEYS[6], events = KEYS[7], listened = KEYS[8],
  prioritized = KEYS[9], reserved = KEYS[13], reservedScores = KEYS[14],
}
local schedulerKey, newestKey, newestLogs, firstKey = KEYS[2], KEYS[10], KEYS[11], KEYS[12]
local sid, readNext, readLast, newestId = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local firstDue, firstId, secondDue = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
-- @include now
-- @include events
-- @include score
-- @include enter
-- @include lastDue
-- @include iteration

local at = rcall('ZSCORE', q.schedulers, sid)
if (at and string.format('%.0f', tonumber(at)) or '') ~= readNext or lastDue(schedulerKey, at) ~= readLast then
  return { 'retry' }
end
local now = nowMs()
local ic = tonumber(rcall('HGET', schedulerKey, 'ic')) or 0
rcall('DEL', schedulerKey)
rcall('HSET', schedulerKey, unpack(ARGV, 9))

if newestId ~= '' and ARGV[8] == 'keep' then
  -- The timing is unchanged: the schedule stays where it is, its newest run with the new template if it
  -- has not started.
  local state = rcall('HGET', newestKey, 'state')
  if state == 'delayed' or state == 'wait' or state == 'prioritized' then
    local t = rcall('HMGET', schedulerKey, unpack(TEMPLATE))
    for i, name in ipairs(TEMPLATE) do
      if t[i] then
        rcall('HSET', newestKey, name, t[i])
      else
        rcall('HDEL', newestKey, name)
      end
    end
  end
  rcall('HSET', schedulerKey, 'ic', math.max(ic, 1), 'last', readLast)
  rcall('ZADD', q.schedulers, readNext, sid)
  return { 'ok', newestId, now }
end

if newestId ~= '' then
  -- Replaced, if it has not started (a started one is a job like any other, left to its worker).
  removeUnstarted(q, newestKey, newestLogs, newestId)
end
if createIteration(schedulerKey, firstKey, q, sid, firstId, firstDue, now, firstDue <= now) then
  ic = ic + 1
end
-- A first run in `delayed` is the one the scheduler points at; one due at once points it at the next period.
local nextDue = firstDue > now and firstDue or secondDue
local limit = tonumber(rcall('HGET', schedulerKey, 'limit'))
if nextDue < 0 or (limit and ic >= limit and nextDue ~= firstDue) then
  rcall('ZREM', q.schedulers, sid)
  rcall('DEL', schedulerKey)
else
  rcall('HSET', schedulerKey, 'ic', ic, 'last', ARGV[5])
  rcall('ZADD', q.schedulers, string.format('%.0f', nextDue), sid)
end
return { 'ok', firstId, now }
