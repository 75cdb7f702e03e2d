--[[
  Sends failed or completed jobs back to the back of `wait` (a job with a priority to `prioritized`, behind
  its equals), keeping their history: `attemptsStarted` (total runs) stays, `retried` counts the redrives; a
  failed job's last error moves to `lastError`. `attemptsMade` stays (BullMQ's retry: a failed job that used
  all its attempts runs once more; a completed job keeps the 1 its hash left out), or is reset: a fresh
  attempts budget. BullMQ 6.7's reprocessJob and moveJobsToWait (which puts every job in `wait`: here a job
  keeps its priority, as reprocessJob's does, whichever call retries it).
  A job's finish time, its run's receipt and start, its failed reason and its return value go: the job is
  as it was before that run. A completed job leaves `completed` (its retention's count is of the set, so
  nothing else holds it); the per-minute counts of `metrics` keep its completion: it happened.
  A flow's child becomes a pending dependency of its parent again (BullMQ 6.7's reprocessJob,
  moveChildBackToParentDependencies): its parent may be in another slot, so the retry leaves a "retried"
  entry in the outbox (lua/includes/handoff.lua) that the caller delivers at once (a sweep if it stops
  first); settleChild-9.lua moves the child from the parent's failed ones, or for a completed child from its
  processed ones while the parent still waits for children, back among its dependencies. A job without a
  parent costs nothing more (`parentKey` is read in the read the retry already makes).
  A completed job with a parent or a deduplication id is checked first: the call changes nothing, and
  answers "need", until the caller sent what the check needs. A flow's child is retried only once the
  caller found its parent still waiting for children, or gone (lib/queue/job-actions.ts: a parent in
  another slot is read there; one that moved on ran, or runs, with the child's result); a job with a
  deduplication id takes that id back (lua/includes/deduplicate.lua: it was released when the job
  completed), without a ttl, so it holds it until it finishes again, unless another job holds it, with a
  ttl or as a live job's hold without one: then it is refused (left in `completed`). A hold with a ttl
  that is still the job's own is left to run out. The hold's keys (the id's key, and the hash of the job
  meta names as its holder, to tell a live holder from a stale one) come with the caller's second call.
  All or nothing with "strict": when a candidate is not in the set, or is refused, nothing changes.

  KEYS[1] from      ZSET   <prefix>:{q}:failed or <prefix>:{q}:completed (as ARGV[3] says)
  KEYS[2] wait      LIST   <prefix>:{q}:wait
  KEYS[3] marker    ZSET   <prefix>:{q}:marker
  KEYS[4] meta      HASH   <prefix>:{q}:meta (deduplication holds without a ttl: de:<deduplication id>)
  KEYS[5] events    STREAM <prefix>:{q}:events
  KEYS[6] listened  ZSET   <prefix>:{q}:listened
  KEYS[7] prioritized ZSET <prefix>:{q}:prioritized (a job with a priority goes there, behind its equals)
  KEYS[8] handoffs  HASH   <prefix>:{q}:handoffs (a flow's outbox: child id -> what its parent must learn)
  KEYS[8 + i]       HASH   job i       (i = 1 .. n)
  KEYS[9 + n ..]    what a "need" reply asked for, in any order: STRING <prefix>:{q}:de:<deduplication id>
                    (a hold with a ttl), HASH <prefix>:{q}:<id> (the job meta names as an id's holder)

  ARGV[1] "strict": every candidate must be in the set (ids named by the caller), or "any": candidates no
          longer there (retried or removed meanwhile) are skipped, and refused ones left; "strict+" or "any+":
          attemptsMade reset
  ARGV[2] the highest score (finish time) a candidate may have, or "+inf": a job that finished again after
          a "retry all" began is not retried by it a second time
  ARGV[3] "failed" or "completed": the set the jobs are retried from, and the `prev` of their event
  ARGV[4] n
  ARGV[4 + i] job id i
  ARGV[5 + n ..] the ids of the flow's children among them whose parents the caller checked

  Returns { "ok", moved ids, { id, entry, ... } the hand-offs written, ids refused and left in the set }, or
  with nothing changed: { "not-in", the first id that is not in the set, its state or "missing" }; { "held",
  id, its deduplication id, the job that holds it } ("strict"); { "need", { id, deduplication id or "", its
  holder in meta or "", parent key or "" } per candidate the caller must check or give keys for }. Emits
  `waiting` (prev ARGV[3]) per job moved.
]]
local rcall = redis.call
local q = {
  from = KEYS[1], wait = KEYS[2], marker = KEYS[3], meta = KEYS[4], events = KEYS[5], listened = KEYS[6], prioritized = KEYS[7],
}
local strict = string.sub(ARGV[1], 1, 6) == 'strict'
local fresh = string.sub(ARGV[1], -1) == '+'
local maxScore = ARGV[2] == '+inf' and math.huge or tonumber(ARGV[2])
local prev = ARGV[3]
local completed = prev == 'completed'
local handoffsKey = KEYS[8]
local n = tonumber(ARGV[4])
-- @include now
-- @include starts
-- @include events
-- @include score
-- @include enter
-- @include handoff

if strict then
  for i = 1, n do
    if not rcall('ZSCORE', q.from, ARGV[4 + i]) then
      return { 'not-in', ARGV[4 + i], rcall('HGET', KEYS[8 + i], 'state') or 'missing' }
    end
  end
end
local candidates = {}
for i = 1, n do
  local score = rcall('ZSCORE', q.from, ARGV[4 + i])
  if score and tonumber(score) <= maxScore then
    candidates[#candidates + 1] = i
  end
end

-- A completed job's checks, before anything is written: returns the candidates to move, the deduplication
-- ids they take back (by the candidate's place) and the ids refused; or a reply that ends the call.
local function checkCompleted()
  local base = string.sub(q.meta, 1, -5)
  local given, checked = {}, {}
  for k = 9 + n, #KEYS do
    given[KEYS[k]] = true
  end
  for a = 5 + n, #ARGV do
    checked[ARGV[a]] = true
  end
  local needs, accepted, holds, refused = {}, {}, {}, {}
  -- Deduplication ids held by a candidate of this call (taken back, or still its own): the next is refused.
  local takenBy = {}
  for _, i in ipairs(candidates) do
    local id = ARGV[4 + i]
    local f = rcall('HMGET', KEYS[8 + i], 'deid', 'parentKey')
    local deid, parentKey = f[1], f[2]
    local field = deid and ('de:' .. deid)
    local dedupKey = deid and (base .. field)
    local holder = deid and rcall('HGET', q.meta, 'de:' .. deid)
    local unchecked = parentKey and not checked[id]
    if unchecked or (deid and not given[dedupKey]) or (holder and holder ~= id and not given[base .. holder]) then
      needs[#needs + 1] = { id, deid or '', holder or '', unchecked and parentKey or '' }
    elseif #needs == 0 then
      local other = false
      if deid then
        local ttlHolder = rcall('GET', dedupKey)
        if takenBy[field] then
          other = takenBy[field]
        elseif ttlHolder and ttlHolder ~= id then
          other = ttlHolder
        elseif holder and holder ~= id then
          -- A hold whose job finished or is gone is stale: the next add would take it over (deduplicate.lua).
          local state = rcall('HGET', base .. holder, 'state')
          if state and state ~= 'completed' and state ~= 'failed' then
            other = holder
          end
        end
        if not other then
          takenBy[field] = id
          if not ttlHolder and holder ~= id then
            holds[i] = deid
          end
        end
      end
      if other and strict then
        return nil, { 'held', id, deid, other }
      elseif other then
        refused[#refused + 1] = id
      else
        accepted[#accepted + 1] = i
      end
    end
  end
  if #needs > 0 then
    return nil, { 'need', needs }
  end
  return accepted, holds, refused
end

local holds, refused = {}, {}
if completed and #candidates > 0 then
  local accepted, more, left = checkCompleted()
  if not accepted then
    return more
  end
  candidates, holds, refused = accepted, more, left
end

local now = nowMs()
local moved, handoffs = {}, {}
for _, i in ipairs(candidates) do
  local id, jobKey = ARGV[4 + i], KEYS[8 + i]
  rcall('ZREM', q.from, id)
  if not completed then
    local reason = rcall('HGET', jobKey, 'failedReason')
    if reason then
      rcall('HSET', jobKey, 'lastError', reason)
    end
  end
  local f = rcall('HMGET', jobKey, 'token', 'attemptsStarted', 'parentKey', 'parent', 'attemptsMade')
  local fields = { 'attemptsStarted', startsOf(f[1], f[2]) }
  if fresh then
    rcall('HDEL', jobKey, 'attemptsMade')
  elseif completed and not f[5] then
    -- A completed job's hash leaves out a first attempt (finish-16.lua); waiting, no field reads as none.
    fields[3], fields[4] = 'attemptsMade', '1'
  end
  rcall('HSET', jobKey, unpack(fields))
  rcall('HDEL', jobKey, 'failedReason', 'finishedOn', 'token', 'returnValue', 'startedOn')
  local gen = rcall('HINCRBY', jobKey, 'retried', 1)
  local deid = holds[i]
  if deid then
    rcall('HSET', q.meta, 'de:' .. deid, id)
  end
  if f[3] then
    -- Overwrites an entry of its end not delivered yet: the parent learns the retry instead.
    handoffs[#handoffs + 1] = id
    handoffs[#handoffs + 1] = handOff(handoffsKey, id, f[3], f[4], 'retried', '', false, gen)
  end
  enterWait(jobKey, q, id, now, false)
  emit(q, 'waiting', 'jobId', id, 'prev', prev)
  moved[#moved + 1] = id
end
return { 'ok', moved, handoffs, refused }
