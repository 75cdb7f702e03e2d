--[[
  Removes a job scheduler (queue.removeJobScheduler) and its pending run: its newest run, if no worker has
  started it (delayed, waiting, or reserved by a worker's take-ahead: a reservation is taken back, so the
  run never starts), unless it joined a flow (lua/includes/iteration.lua: then it stays, a job like any
  other). Runs older than its newest (a backlog made while no worker ran) are due jobs like any other and
  stay. The caller read the scheduler's next period and newest run; when an upsert or an
  advance moved them meanwhile, nothing changes and the caller tries again.

  KEYS[1]  schedulers      ZSET   <prefix>:{q}:schedulers
  KEYS[2]  scheduler       HASH   <prefix>:{q}:schedulers:<sid>
  KEYS[3]  newest          HASH   its newest run
  KEYS[4]  newest log      LIST   its log
  KEYS[5]  delayed         ZSET   <prefix>:{q}:delayed
  KEYS[6]  wait            LIST   <prefix>:{q}:wait
  KEYS[7]  prioritized     ZSET   <prefix>:{q}:prioritized
  KEYS[8]  meta            HASH   <prefix>:{q}:meta
  KEYS[9]  events          STREAM <prefix>:{q}:events
  KEYS[10] listened        ZSET   <prefix>:{q}:listened
  KEYS[11] reserved        ZSET   <prefix>:{q}:reserved
  KEYS[12] reservedScores  HASH   <prefix>:{q}:reservedScores

  ARGV[1] scheduler id
  ARGV[2] its next period the caller read (ms, as stored)
  ARGV[3] its newest run's due time the caller read (ms, as stored)
  ARGV[4] the newest run's id

  Returns 1 (removed), 0 (no such scheduler) or "retry". Emits `removed` for the run removed.
]]
local rcall = redis.call
local q = {
  delayed = KEYS[5], wait = KEYS[6], prioritized = KEYS[7], meta = KEYS[8], events = KEYS[9], listened = KEYS[10],
  reserved = KEYS[11], reservedScores = KEYS[12],
}
local schedulersKey, schedulerKey, newestKey, newestLogs = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local sid, readNext, readLast, newestId = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
-- @include now
-- @include events
-- @include score
-- @include enter
-- @include lastDue
-- @include iteration

local at = rcall('ZSCORE', schedulersKey, sid)
if not at then
  rcall('DEL', schedulerKey)
  return 0
end
if string.format('%.0f', tonumber(at)) ~= readNext or lastDue(schedulerKey, at) ~= readLast then
  return 'retry'
end
removeUnstarted(q, newestKey, newestLogs, newestId)
rcall('ZREM', schedulersKey, sid)
rcall('DEL', schedulerKey)
return 1
