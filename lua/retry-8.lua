--[[
  Sends failed jobs back to the back of `wait`, keeping their history: the last error moves to
  `lastError`, `attemptsStarted` (total runs) stays, `retried` counts the redrives. `attemptsMade` stays
  (BullMQ's retry: a job that used all its attempts runs once more), or is reset: a fresh attempts budget.
  All or nothing: when a candidate is not in `failed`, nothing changes.
  A flow's child becomes a pending dependency of its parent again (BullMQ 6.7's reprocessJob,
  moveChildBackToParentDependencies): its parent may be in another slot, so the retry leaves a "retried"
  entry in the outbox (lua/includes/handoff.lua) that the caller delivers at once (a sweep if it stops
  first); settleChild-9.lua moves the child from the parent's failed ones back among its dependencies. A
  job without a parent costs nothing more (`parentKey` is read in the read the retry already makes).

  KEYS[1] failed    ZSET   <prefix>:{q}:failed
  KEYS[2] wait      LIST   <prefix>:{q}:wait
  KEYS[3] marker    ZSET   <prefix>:{q}:marker
  KEYS[4] meta      HASH   <prefix>:{q}:meta
  KEYS[5] events    STREAM <prefix>:{q}:events
  KEYS[6] listened  ZSET   <prefix>:{q}:listened
  KEYS[7] prioritized ZSET <prefix>:{q}:prioritized (a job with a priority goes there, behind its equals)
  KEYS[8] handoffs  HASH   <prefix>:{q}:handoffs (a flow's outbox: child id -> what its parent must learn)
  KEYS[8 + i]       HASH   job i       (i = 1 .. n)

  ARGV[1] "strict": every candidate must be failed (ids named by the caller), or "any": candidates no
          longer failed (retried or removed meanwhile) are skipped; "strict+" or "any+": attemptsMade reset
  ARGV[2] the highest score (finish time) a candidate may have, or "+inf": a job that failed again after
          a "retry all" began is not retried by it a second time
  ARGV[2 + i] job id i

  Returns { "ok", moved ids, { id, entry, ... } the hand-offs written } or { "not-failed", the first id that is not in `failed`, its state or
  "missing" }. Emits `waiting` (prev `failed`) per job moved.
]]
local rcall = redis.call
local q = {
  failed = KEYS[1], wait = KEYS[2], marker = KEYS[3], meta = KEYS[4], events = KEYS[5], listened = KEYS[6], prioritized = KEYS[7],
}
local strict = string.sub(ARGV[1], 1, 6) == 'strict'
local fresh = string.sub(ARGV[1], -1) == '+'
local maxScore = ARGV[2] == '+inf' and math.huge or tonumber(ARGV[2])
local handoffsKey = KEYS[8]
local n = #ARGV - 2
-- @include now
-- @include starts
-- @include events
-- @include score
-- @include enter
-- @include handoff

if strict then
  for i = 1, n do
    if not rcall('ZSCORE', q.failed, ARGV[2 + i]) then
      return { 'not-failed', ARGV[2 + i], rcall('HGET', KEYS[8 + i], 'state') or 'missing' }
    end
  end
end
local now = nowMs()
local moved, handoffs = {}, {}
for i = 1, n do
  local id, jobKey = ARGV[2 + i], KEYS[8 + i]
  local score = rcall('ZSCORE', q.failed, id)
  if score and tonumber(score) <= maxScore then
    rcall('ZREM', q.failed, id)
    local reason = rcall('HGET', jobKey, 'failedReason')
    if reason then
      rcall('HSET', jobKey, 'lastError', reason)
    end
    local f = rcall('HMGET', jobKey, 'token', 'attemptsStarted', 'parentKey', 'parent')
    rcall('HSET', jobKey, 'attemptsStarted', startsOf(f[1], f[2]))
    rcall('HDEL', jobKey, 'failedReason', 'finishedOn', 'token', 'returnValue', 'startedOn')
    if fresh then
      rcall('HDEL', jobKey, 'attemptsMade')
    end
    local gen = rcall('HINCRBY', jobKey, 'retried', 1)
    if f[3] then
      -- Overwrites an entry of its failure not delivered yet: the parent learns the retry instead.
      handoffs[#handoffs + 1] = id
      handoffs[#handoffs + 1] = handOff(handoffsKey, id, f[3], f[4], 'retried', '', false, gen)
    end
    enterWait(jobKey, q, id, now, false)
    emit(q, 'waiting', 'jobId', id, 'prev', 'failed')
    moved[#moved + 1] = id
  end
end
return { 'ok', moved, handoffs }
