--[[
  One bounded step of the two-phase stalled sweep. Detect and move happen in this one call, so
  overlapping sweeps can never recover a job twice. The caller passes the ids with the earliest lease
  deadlines (from probe-11.lua, or ZRANGEBYSCORE on `active`); the script re-checks each one.

  For each candidate still in `active` whose deadline has passed:
    lease key still there           -> a live lease whose recorded deadline is stale (heartbeats refresh
                                       the index only every other tick): re-score it to now + its TTL
    lease key gone, not marked      -> mark it in `stalled` (phase 1)
    marked at least graceMs ago     -> recover it (phase 2): attemptsMade + 1, then back to the right
                                       of `wait` (served next, no backoff; a job with a priority to the
                                       front of its priority), or to `failed` when no attempts are left
    marked more recently            -> leave it for a later sweep
  A candidate whose deadline is still ahead ends the step: every later one in the index is alive too.
  In audit mode the candidates are a window of the index taken regardless of deadline, to find leases
  deleted by hand or evicted before their recorded deadline: only candidates whose deadline is still ahead
  are judged, and a live deadline does not end the step.

  KEYS[1] active    ZSET   <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[2] stalled   ZSET   <prefix>:{q}:stalled (id -> time of mark, ms)
  KEYS[3] wait      LIST   <prefix>:{q}:wait
  KEYS[4] failed    ZSET   <prefix>:{q}:failed
  KEYS[5] marker    ZSET   <prefix>:{q}:marker
  KEYS[6] meta      HASH   <prefix>:{q}:meta (failedNew count, retention limits)
  KEYS[7] events    STREAM <prefix>:{q}:events
  KEYS[8] listened  STRING <prefix>:{q}:listened
  KEYS[9] metrics   HASH   <prefix>:{q}:metrics (finished jobs per minute, see minutes.lua)
  KEYS[10] prioritized ZSET <prefix>:{q}:prioritized (a recovered job with a priority: the front of it)
  KEYS[11 + 3i]     HASH   job i        (i = 0 .. n-1)
  KEYS[12 + 3i]     STRING lease of job i
  KEYS[13 + 3i]     LIST   log of job i (removed with a failed job whose retention is "0")

  ARGV[1] grace between mark and recovery (ms)
  ARGV[2] mode: "deadline" (candidates in deadline order) or "audit"
  ARGV[3 + i] job id i

  Returns { marked ids, recovered ids, failed ids, number of candidates left in active in place, done
  (1|0), trim (1 when `failed` is past its retention plus slack) } where done = 1 when a live deadline
  was reached, so no later candidate can be stalled. A recovery emits `waiting` (prev `active`) then
  `stalled`; a stall on the last attempt `failed` then `retries-exhausted` (useAttempt.lua).
]]
local rcall = redis.call
local activeKey, stalledKey = KEYS[1], KEYS[2]
local q = {
  wait = KEYS[3], failed = KEYS[4], marker = KEYS[5], meta = KEYS[6], events = KEYS[7], listened = KEYS[8], prioritized = KEYS[10],
}
local graceMs, audit = tonumber(ARGV[1]), ARGV[2] == 'audit'
local n = #ARGV - 2
-- @include now
-- @include events
-- @include score
-- @include leaveActive
-- @include retention
-- @include enter
-- @include useAttempt
-- @include minutes

local now = nowMs()
local marked, recovered, failed = {}, {}, {}
local left, done, trim = 0, 0, 0
for i = 0, n - 1 do
  local id = ARGV[3 + i]
  local jobKey, lockKey, logsKey = KEYS[11 + 3 * i], KEYS[12 + 3 * i], KEYS[13 + 3 * i]
  local deadline = rcall('ZSCORE', activeKey, id)
  -- The audit looks only at live deadlines: expired ones are the deadline pass's (maybe this very sweep's).
  if deadline and not (audit and tonumber(deadline) <= now) then
    if tonumber(deadline) > now and not audit then
      done = 1
      break
    end
    local ttl = rcall('PTTL', lockKey)
    if ttl ~= -2 then
      -- The lease key is there: alive. Re-scored, it leaves the expired range (a key with no TTL, which
      -- EchoMQ never writes, stays where it is).
      if ttl > 0 and not audit then
        rcall('ZADD', activeKey, now + ttl, id)
      else
        left = left + 1
      end
    else
      left = left + 1
      local markedAt = rcall('ZSCORE', stalledKey, id)
      if not markedAt then
        rcall('ZADD', stalledKey, now, id)
        marked[#marked + 1] = id
      elseif now - tonumber(markedAt) >= graceMs then
        left = left - 1
        local worker = rcall('HGET', jobKey, 'workerName')
        leaveActive(lockKey, activeKey, stalledKey, id)
        rcall('HDEL', jobKey, 'token')
        local reason = 'job stalled: its lease expired before it finished (worker ' .. (worker or 'unknown') .. ')'
        if useAttempt(jobKey, q, id, now, reason, { front = true, delayMs = 0 }) == 'failed' then
          failed[#failed + 1] = id
          countFinished(KEYS[9], 'failed', now)
          if fileFinished(jobKey, logsKey, q, 'failed', id, now) ~= '' then
            trim = 1
          end
        else
          emit(q, 'stalled', 'jobId', id)
          recovered[#recovered + 1] = id
        end
      end
    end
  end
end
return { marked, recovered, failed, left, done, trim }
