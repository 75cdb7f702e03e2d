--[[
  Promotes a job scheduler's iteration that is due and makes the next one, in one step: whoever promotes
  it (a worker's promoter, the sweep of the Lambda or of `echomq sweep`) advances the schedule, so it
  keeps producing jobs with no worker running. The caller computed the next due time from the scheduler
  (lib/schedulers/timing.ts); the next iteration is made only while the scheduler still points at this
  one (an upsert meanwhile made its own), and only once (its id is deterministic). With no next due time
  (limit reached, past endDate) the scheduler ends.

  KEYS[1]  schedulers   ZSET   <prefix>:{q}:schedulers (id -> due time of its pending iteration, ms)
  KEYS[2]  scheduler    HASH   <prefix>:{q}:schedulers:<sid>
  KEYS[3]  delayed      ZSET   <prefix>:{q}:delayed
  KEYS[4]  wait         LIST   <prefix>:{q}:wait
  KEYS[5]  marker       ZSET   <prefix>:{q}:marker
  KEYS[6]  meta         HASH   <prefix>:{q}:meta
  KEYS[7]  events       STREAM <prefix>:{q}:events
  KEYS[8]  listened     STRING <prefix>:{q}:listened
  KEYS[9]  prioritized  ZSET   <prefix>:{q}:prioritized
  KEYS[10] job          HASH   the due iteration, <prefix>:{q}:repeat:<sid>:<due>
  KEYS[11] next job     HASH   the next iteration, <prefix>:{q}:repeat:<sid>:<next due>

  ARGV[1] scheduler id
  ARGV[2] the due iteration's id
  ARGV[3] its due time (ms)
  ARGV[4] the next iteration's due time (ms), or -1 for none: the scheduler ends
  ARGV[5] the next iteration's id ("" for none)
  ARGV[6] 1 to promote it even if not due yet (queue.promoteJob: an operator's "run it now"), else 0

  Returns { promoted (1 | 0: not in `delayed`, or not due yet and not early), next made (1 | 0) }. Emits `waiting` (prev
  `delayed`) for the one promoted, and `added`, `delayed` for the next.
]]
local rcall = redis.call
local q = {
  schedulers = KEYS[1], delayed = KEYS[3], wait = KEYS[4], marker = KEYS[5], meta = KEYS[6], events = KEYS[7], listened = KEYS[8],
  prioritized = KEYS[9],
}
local schedulerKey, jobKey, nextKey = KEYS[2], KEYS[10], KEYS[11]
local sid, id, due, nextDue, nextId, early = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6] == '1'
-- @include now
-- @include events
-- @include score
-- @include enter
-- @include iteration

local now = nowMs()
local score = rcall('ZSCORE', q.delayed, id)
if not score or (math.floor(tonumber(score)) > now and not early) then
  return { 0, 0 }
end
promoteIteration(jobKey, q, id, now)
local made = 0
local at = rcall('ZSCORE', q.schedulers, sid)
if at and tonumber(at) == due then
  if nextDue < 0 then
    rcall('ZREM', q.schedulers, sid)
    rcall('DEL', schedulerKey)
  else
    if createIteration(schedulerKey, nextKey, q, sid, nextId, nextDue, now) then
      made = 1
      rcall('HINCRBY', schedulerKey, 'ic', 1)
    end
    rcall('ZADD', q.schedulers, string.format('%.0f', nextDue), sid)
  end
end
return { 1, made }
