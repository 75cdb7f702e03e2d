--[[
  One bounded step of the two-phase stalled sweep. Detect and move happen in this one call, so
  overlapping sweeps can never recover a job twice. The caller passes the ids with the earliest lease
  deadlines (ZRANGE active by rank); the script re-checks each one.

  For each candidate still in `active` whose deadline has passed and whose lease key is gone:
    not marked                      -> mark it in `stalled` (phase 1)
    marked at least graceMs ago     -> recover it (phase 2): attemptsMade + 1, then back to the right
                                       of `wait`, or to `failed` when no attempts are left
    marked more recently            -> leave it for a later sweep
  A candidate whose deadline is still ahead ends the step: every later one in the index is alive too.
  In audit mode the candidates are a window of the index taken regardless of deadline, to find leases
  deleted by hand or evicted before their recorded deadline: only candidates whose deadline is still ahead
  are judged, and a live deadline does not end the step.

  KEYS[1] active   ZSET  <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[2] stalled  ZSET  <prefix>:{q}:stalled (id -> time of mark, ms)
  KEYS[3] wait     LIST  <prefix>:{q}:wait
  KEYS[4] failed   ZSET  <prefix>:{q}:failed
  KEYS[5] marker   ZSET  <prefix>:{q}:marker
  KEYS[6 + 2i]     HASH  job i        (i = 0 .. n-1)
  KEYS[7 + 2i]     STRING lease of job i

  ARGV[1] grace between mark and recovery (ms)
  ARGV[2] mode: "deadline" (candidates in deadline order) or "audit"
  ARGV[3 + i] job id i

  Returns { marked ids, recovered ids, failed ids, number of candidates left in active, done (1|0) }
  where done = 1 when a live deadline was reached, so no later candidate can be stalled.
]]
local rcall = redis.call
local activeKey, stalledKey, waitKey, failedKey, markerKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local graceMs, audit = tonumber(ARGV[1]), ARGV[2] == 'audit'
local n = #ARGV - 2
-- @include now
-- @include leaveActive
-- @include useAttempt

local now = nowMs()
local marked, recovered, failed = {}, {}, {}
local left, done = 0, 0
for i = 0, n - 1 do
  local id = ARGV[3 + i]
  local jobKey, lockKey = KEYS[6 + 2 * i], KEYS[7 + 2 * i]
  local deadline = rcall('ZSCORE', activeKey, id)
  -- The audit looks only at live deadlines: expired ones are the deadline pass's (maybe this very sweep's).
  if deadline and not (audit and tonumber(deadline) <= now) then
    if tonumber(deadline) > now and not audit then
      done = 1
      break
    end
    left = left + 1
    if rcall('EXISTS', lockKey) == 0 then
      local markedAt = rcall('ZSCORE', stalledKey, id)
      if not markedAt then
        rcall('ZADD', stalledKey, now, id)
        marked[#marked + 1] = id
      elseif now - tonumber(markedAt) >= graceMs then
        left = left - 1
        leaveActive(jobKey, lockKey, activeKey, stalledKey, id)
        local reason = 'job stalled: its lease expired before it finished'
        if useAttempt(jobKey, waitKey, failedKey, markerKey, id, now, reason, true) == 'failed' then
          failed[#failed + 1] = id
        else
          recovered[#recovered + 1] = id
        end
      end
    end
  end
end
return { marked, recovered, failed, left, done }
