--[[
  One bounded step of the two-phase stalled sweep. Detect and move happen in this one call, so
  overlapping sweeps can never recover a job twice. The caller passes the ids with the earliest lease
  deadlines (from probe-15.lua, or ZRANGEBYSCORE on `active`); the script re-checks each one.

  For each candidate still in `active` whose deadline has passed:
    not marked, lease key there     -> a live lease whose recorded deadline is stale (heartbeats refresh
                                       the index only every other tick): re-score it to now + its TTL
    not marked, lease key gone      -> mark it in `stalled` (phase 1)
    marked at least graceMs ago     -> recover it (phase 2), as BullMQ counts stalls: the job's
                                       `stalledCounter` + 1 (a field written only by a stall), no
                                       attempt used; back to the right of `wait` (served next, no
                                       backoff; a job with a priority to the front of its priority), or,
                                       past the queue's maxStalledCount (meta's `maxStalledCount`, written
                                       only when not the default, 1), to `failed` ("job stalled more than
                                       allowable limit"; a stall never uses an attempt), releasing its
                                       deduplication id (releaseDeduplication.lua); a flow's parent
                                       (its hash's `deps`) that its retention of 0 removes at once goes
                                       with its four flow keys, and is set apart (left as it is, and
                                       returned) when they did not come: the caller then sends it again
                                       in mode "parents", with them
    marked more recently            -> leave it for a later sweep
  (A marked job's lease is not looked at: whatever writes a lease again clears the mark in that step.)
  A candidate whose deadline is still ahead ends the step: every later one in the index is alive too.
  In audit mode the candidates are a window of the index taken regardless of deadline, to find leases
  deleted by hand or evicted before their recorded deadline: only candidates whose deadline is still ahead
  are judged, and a live deadline does not end the step.

  KEYS[1] active    ZSET   <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[2] stalled   ZSET   <prefix>:{q}:stalled (id -> time of mark, ms)
  KEYS[3] wait      LIST   <prefix>:{q}:wait
  KEYS[4] failed    ZSET   <prefix>:{q}:failed
  KEYS[5] marker    ZSET   <prefix>:{q}:marker
  KEYS[6] meta      HASH   <prefix>:{q}:meta (failedNew count, retention limits, maxStalledCount, `parents`)
  KEYS[7] events    STREAM <prefix>:{q}:events
  KEYS[8] listened  ZSET   <prefix>:{q}:listened
  KEYS[9] metrics   HASH   <prefix>:{q}:metrics (finished jobs per minute, see minutes.lua)
  KEYS[10] prioritized ZSET <prefix>:{q}:prioritized (a recovered job with a priority: the front of it)
  KEYS[11] handoffs HASH   <prefix>:{q}:handoffs (a flow's child failed here: what its parent must learn)
  KEYS[12 + 3i]     HASH   job i        (i = 0 .. n-1)
  KEYS[13 + 3i]     STRING lease of job i
  KEYS[14 + 3i]     LIST   log of job i (removed with a failed job whose retention is "0")
  In mode "parents", seven keys per job: KEYS[12 + 7i] .. KEYS[14 + 7i] as above, then KEYS[15 + 7i] ..
  KEYS[18 + 7i] SET, HASH, HASH, ZSET: its dependencies, processed, failed and unsuccessful (a flow's
  parent's keys, removed with it, counted out of meta's `parents`: parents.lua)

  ARGV[1] grace between mark and recovery (ms)
  ARGV[2] mode: "deadline" (candidates in deadline order), "audit", or "parents" (the parents a call set
          apart, with their flow keys: judged as in the deadline walk)
  ARGV[3] next page: in the deadline walk, how many candidates to return for the next call when this one
          had that many and did not reach a live deadline (0: none)
  ARGV[4] candidates of the walk before this call that stay in place (marked, within grace): the next
          page starts past them and this call's own
  ARGV[5 + i] job id i

  Returns { marked ids, recovered ids, failed ids, number of candidates left in active in place, done
  (1|0), trim (1 when `failed` is past its retention plus slack), the next page of candidates, the lease
  deadline of the first job recovered (false when none), the hand-offs written { id, entry, ... } (a
  flow's child failed past the allowance under a failure policy, or removed at once by a retention of 0:
  lua/includes/handoff.lua), the parents set apart (ids, for a call in mode "parents"; counted in the
  candidates left in place), the jobs failed here as they were { id, { field, value, ... }, ... } (for a
  worker's `failed` event: one its retention removes at once, or the pass's trim, is gone after; at most
  256 KiB of their data a call) } where done = 1 when a live deadline was
  reached, so no later candidate can be stalled. The next page saves the walk a round trip per step, and
  the deadline tells the reaper when the longest-waiting recovered job's wait began. A recovery emits
  `waiting` (prev `active`) then `stalled`; a stall past the allowance `stalled` then `failed`.
]]
local rcall = redis.call
local activeKey, stalledKey = KEYS[1], KEYS[2]
local q = {
  wait = KEYS[3], failed = KEYS[4], marker = KEYS[5], meta = KEYS[6], events = KEYS[7], listened = KEYS[8], prioritized = KEYS[10],
}
local graceMs, audit, pageSize, passed = tonumber(ARGV[1]), ARGV[2] == 'audit', tonumber(ARGV[3]), tonumber(ARGV[4])
local withFlows = ARGV[2] == 'parents'
-- Keys per candidate: its job, lease and log, and with flows a parent's four.
local stride = withFlows and 7 or 3
local n = #ARGV - 4
-- @include now
-- @include events
-- @include score
-- @include retention
-- @include enter
-- @include releaseDeduplication
-- @include minutes
-- @include handoff
-- @include parents

local now = nowMs()
local marked, recovered, failed = {}, {}, {}
-- BullMQ's reason for a job that stalled more than maxStalledCount times; the allowance is read once, when needed.
local STALLED_TOO_OFTEN = 'job stalled more than allowable limit'
local maxStalled = nil
local left, done, trim, firstDeadline = 0, 0, 0, false
local handoffs = {}
-- Parents that would go at once but whose flow keys did not come (see mode "parents").
local setApart = {}
-- The jobs failed here, as they were (id, fields, ...), for a worker's `failed` event: at most
-- FAILED_BYTES of their data, stacks and errors a call, so a reply stays small whatever the jobs (one past it
-- goes back as its id alone, and the worker reads what is left of it).
local failedJobs, failedBytes, FAILED_BYTES = {}, 0, 262144
-- A flow's child failed here is removed at once when its retention in `failed` is 0 (read only for a child).
local function failedRemovedNow(jobKey)
  return parseKeep(rcall('HGET', jobKey, 'keepFailed') or DEFAULT_KEEP.failed) == 0
end
if n == 0 then
  return { marked, recovered, failed, left, done, trim, {}, firstDeadline, handoffs, setApart, {} }
end
-- Per job only what cannot be batched (for a recovery its hash, read once and written once; a live
-- lease's TTL); the sets and the leases are read and written once per call. Numbers written per job are
-- made text once: Lua formats a number on every call that passes it.
local ids = ARGV -- job id i is ids[4 + i]
local marks = rcall('ZMSCORE', stalledKey, unpack(ARGV, 5))
-- A marked job is in `active` (whatever takes a job out of `active` clears its mark in the same step) and
-- past its deadline (its lease is gone): in the deadline walk only the unmarked ones' deadlines are read.
local deadlines = {}
local markedCount = 0
for i = 1, n do
  if marks[i] then
    markedCount = markedCount + 1
  end
end
if audit or markedCount == 0 then
  deadlines = rcall('ZMSCORE', activeKey, unpack(ARGV, 5))
elseif markedCount < n then
  local unmarked, at = {}, {}
  for i = 1, n do
    if not marks[i] then
      unmarked[#unmarked + 1] = ids[4 + i]
      at[#unmarked] = i
    end
  end
  if #unmarked > 0 then
    local read = rcall('ZMSCORE', activeKey, unpack(unmarked))
    for k, i in ipairs(at) do
      deadlines[i] = read[k]
    end
  end
end
-- The leases of the candidates to judge that are not marked, in one read: a PTTL follows only for a live
-- one (to re-score it), which in the deadline walk is a lease renewed since its deadline was recorded.
local lockAt, lockKeys = {}, {}
for i = 1, n do
  local deadline = deadlines[i] and tonumber(deadlines[i])
  if deadline and not marks[i] then
    if not audit and deadline > now then
      break
    end
    if not (audit and deadline <= now) then
      lockKeys[#lockKeys + 1] = KEYS[13 + stride * (i - 1)]
      lockAt[i] = #lockKeys
    end
  end
end
local leases = #lockKeys > 0 and rcall('MGET', unpack(lockKeys)) or {}
local gone, toWait = {}, {}
local nowText = string.format('%d', now)
-- One worker's crash stalls many jobs: their reason is made once.
local reasons = {}
for i = 0, n - 1 do
  -- In the deadline walk a marked job's deadline is past (see above) and not read: 0 stands for it.
  local id, deadline = ids[5 + i], (marks[i + 1] and not audit) and 0 or deadlines[i + 1]
  local at = 12 + stride * i
  local jobKey, lockKey, logsKey = KEYS[at], KEYS[at + 1], KEYS[at + 2]
  local hasLease = lockAt[i + 1] and leases[lockAt[i + 1]]
  -- The audit looks only at live deadlines: expired ones are the deadline pass's (maybe this very sweep's).
  if deadline and not (audit and tonumber(deadline) <= now) then
    if tonumber(deadline) > now and not audit then
      done = 1
      break
    end
    -- A mark is made only while the lease key is gone, and every script that writes a lease again
    -- (extend-2, reclaim-2) clears the mark in the same step, so a job still marked has had no lease
    -- since: only an unmarked candidate needs its lease looked at.
    local markedAt = marks[i + 1]
    local ttl = hasLease and rcall('PTTL', lockKey) or -2
    if ttl ~= -2 then
      -- The lease key is there: alive. Re-scored, it leaves the expired range (a key with no TTL, which
      -- EchoMQ never writes, stays where it is).
      if ttl > 0 and not audit then
        rcall('ZADD', activeKey, now + ttl, id)
      else
        left = left + 1
      end
    elseif not markedAt then
      left = left + 1
      marked[#marked + 1] = id
    elseif now - tonumber(markedAt) < graceMs then
      left = left + 1
    else
      local f = rcall('HMGET', jobKey, 'workerName', 'stalledCounter', 'priority', 'token', 'deid', 'parentKey', 'parent', 'retried',
        'deps')
      local stalls = (tonumber(f[2]) or 0) + 1
      if maxStalled == nil then
        maxStalled = tonumber(rcall('HGET', q.meta, 'maxStalledCount')) or DEFAULT_MAX_STALLED_COUNT
      end
      if stalls > maxStalled and f[9] and not withFlows and failedRemovedNow(jobKey) then
        -- A parent failed now would go at once without its flow keys, left for good: the caller sends it
        -- again with them (mode "parents"). Until then nothing changed: it is left in place.
        left = left + 1
        setApart[#setApart + 1] = id
      else
        if #gone == 0 and not audit then
          firstDeadline = rcall('ZSCORE', activeKey, id)
        end
        gone[#gone + 1] = id
        local worker = f[1] or 'unknown'
        local reason = reasons[worker]
        if not reason then
          reason = 'job stalled: lease expired (worker ' .. worker .. ')'
          reasons[worker] = reason
        end
        -- The run's token, taken away: "~<token>" matches no run and no receipt, and keeps the start number.
        local takenAway = '~' .. (f[4] or ':0')
        if stalls > maxStalled then
          -- Stalled once too often (a job that crashes its worker): failed as a final run would fail it
          -- (useAttempt.lua's failed branch), with no attempt used: a stall is counted apart.
          rcall('HSET', jobKey, 'token', takenAway, 'stalledCounter', stalls, 'state', 'failed', 'failedReason', STALLED_TOO_OFTEN,
            'finishedOn', nowText)
          rcall('HINCRBY', q.meta, 'failedNew', 1)
          releaseDeduplication(q.meta, f[5], id)
          -- As BullMQ's: `stalled`, then `failed`.
          emit(q, 'stalled', 'jobId', id)
          emit(q, 'failed', 'jobId', id, 'failedReason', STALLED_TOO_OFTEN, 'prev', 'active')
          failed[#failed + 1] = id
          local entry = f[6] and handOff(KEYS[11], id, f[6], f[7], 'failed', STALLED_TOO_OFTEN, failedRemovedNow(jobKey), f[8])
          if entry then
            handoffs[#handoffs + 1] = id
            handoffs[#handoffs + 1] = entry
          end
          countFinished(KEYS[9], 'failed', now)
          -- The job as it failed goes back with the reply: a worker's `failed` event tells of it as BullMQ's
          -- does, even when its retention removes it now or the pass's trim does (rare: a stall past the allowance).
          local size = rcall('HSTRLEN', jobKey, 'data') + rcall('HSTRLEN', jobKey, 'stacktrace') + rcall('HSTRLEN', jobKey, 'lastError')
          if failedBytes + size <= FAILED_BYTES then
            failedBytes = failedBytes + size
            failedJobs[#failedJobs + 1] = id
            failedJobs[#failedJobs + 1] = rcall('HGETALL', jobKey)
          end
          -- A parent's flow keys came only in mode "parents" (its `deps` read again here, as it may have gone).
          local flowKeys = withFlows and f[9] and { KEYS[at + 3], KEYS[at + 4], KEYS[at + 5], KEYS[at + 6] } or nil
          local trimSet, removed = fileFinished(jobKey, logsKey, q, 'failed', id, now, nil, flowKeys)
          if trimSet ~= '' then
            trim = 1
          end
          if removed and flowKeys then
            countOutParents(q.meta, 1)
          end
        else
          -- Back in line, served next (useAttempt's retry without a backoff, done here in one write).
          local priority = tonumber(f[3]) or 0
          rcall('HSET', jobKey, 'state', priority > 0 and 'prioritized' or 'wait', 'waitingSince', nowText, 'lastError', reason,
            'stalledCounter', stalls, 'token', takenAway)
          if priority > 0 then
            rcall('ZADD', q.prioritized, prioritizedScore(q, priority, true), id)
          else
            toWait[#toWait + 1] = id
          end
          if listening(q) then
            emit(q, 'waiting', 'jobId', id, 'prev', 'active')
            emit(q, 'stalled', 'jobId', id)
          end
          recovered[#recovered + 1] = id
        end
      end
    end
  end
end
if #marked > 0 then
  local members = {}
  for i, id in ipairs(marked) do
    members[2 * i - 1], members[2 * i] = nowText, id
  end
  rcall('ZADD', stalledKey, unpack(members))
end
if #gone > 0 then
  -- Their leases are gone already (PTTL said so): only the index and the marks to clear.
  rcall('ZREM', activeKey, unpack(gone))
  rcall('ZREM', stalledKey, unpack(gone))
end
if #toWait > 0 then
  rcall('RPUSH', q.wait, unpack(toWait))
end
if #recovered > 0 then
  rcall('ZADD', q.marker, 0, '0')
end
local page = {}
if pageSize > 0 and done == 0 and n >= pageSize then
  page = rcall('ZRANGEBYSCORE', activeKey, '-inf', now, 'LIMIT', passed + left, pageSize)
end
return { marked, recovered, failed, left, done, trim, page, firstDeadline, handoffs, setApart, failedJobs }
