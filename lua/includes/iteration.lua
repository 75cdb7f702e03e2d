-- A job scheduler's iterations: jobs with id repeat:<sid>:<due ms>, made from the template the scheduler
-- hash holds (the same field names as a job's). The scheduler hash keeps `ic` (iterations made) and
-- `last` (the due time of the newest one); `schedulers` scores the scheduler with its next period. When
-- `last` equals it, that run is made already and waits in `delayed` (a worker started the one before, as
-- BullMQ makes it; iterate-11.lua); otherwise it is made when it falls due. A scheduler made before
-- `last` existed always had its next run made: `last` reads as the next period then (lastDue). Needs enter,
-- events, score and lastDue.
local TEMPLATE = { 'name', 'data', 'attempts', 'backoff', 'keep', 'keepFailed', 'keepLogs', 'priority', 'stackTraceLimit' }

-- Creates iteration `id` of scheduler `sid`, due at `due`, unless it exists (another producer made it:
-- the deterministic id makes that a no-op): into `delayed`, or with `inLine` straight into line, waiting
-- since it fell due. The template is read once per call (cached in `q`). Returns true when created.
local function createIteration(schedulerKey, jobKey, q, sid, id, due, now, inLine)
  if redis.call('EXISTS', jobKey) == 1 then
    return false
  end
  if not q.template then
    local t = redis.call('HMGET', schedulerKey, unpack(TEMPLATE))
    q.template = { 'createdOn', '', 'repeatJobKey', sid }
    for i, name in ipairs(TEMPLATE) do
      if t[i] then
        q.template[#q.template + 1] = name
        q.template[#q.template + 1] = t[i]
      end
    end
    q.jobName = t[1] or sid
    q.priority = tonumber(t[8]) or 0
  end
  q.template[2] = string.format('%d', now)
  redis.call('HSET', jobKey, unpack(q.template))
  emit(q, 'added', 'jobId', id, 'name', q.jobName)
  if not inLine then
    enterDelayed(jobKey, q, id, due)
    emit(q, 'delayed', 'jobId', id, 'delay', due)
  elseif due < now then
    -- Late (made by a catch-up): it has waited since it fell due, which is what OldestWaitAge should say.
    enterWait(jobKey, q, id, due, false, q.priority)
    emit(q, 'waiting', 'jobId', id)
  else
    enterWait(jobKey, q, id, now, false, q.priority, true)
    emit(q, 'waiting', 'jobId', id)
  end
  return true
end

-- Moves a due iteration (in `delayed`) into line, as promote-7.lua moves any job.
local function promoteIteration(jobKey, q, id, now)
  redis.call('ZREM', q.delayed, id)
  redis.call('HDEL', jobKey, 'dueAt', 'lastDelay')
  enterWait(jobKey, q, id, now, false)
  emit(q, 'waiting', 'jobId', id, 'prev', 'delayed')
end

-- Removes iteration `id` if no worker has started it: from `delayed`, from the line, or from a worker's
-- reservation (takeJobs.lua skips a reserved id no longer in `reserved`, so it never runs). `q` holds
-- { delayed, wait, prioritized, reserved, reservedScores }. Returns the state it left, or false. One that
-- joined a flow (a child of a parent, or a parent of a child added under it) stays, a job like any other:
-- removed here, a parent would wait for it for good, or its flow keys stay behind.
local function removeUnstarted(q, jobKey, logsKey, id)
  local f = redis.call('HMGET', jobKey, 'state', 'parentKey', 'deps')
  local state = f[1]
  local removed = false
  if f[2] or f[3] then
    return false
  elseif state == 'delayed' then
    removed = redis.call('ZREM', q.delayed, id) == 1
  elseif state == 'wait' or state == 'prioritized' then
    if redis.call('ZREM', q.reserved, id) == 1 then
      redis.call('HDEL', q.reservedScores, id)
      removed = true
    elseif state == 'wait' then
      removed = redis.call('LREM', q.wait, 0, id) > 0
    else
      removed = redis.call('ZREM', q.prioritized, id) == 1
    end
  end
  if not removed then
    return false
  end
  redis.call('UNLINK', jobKey, logsKey)
  emit(q, 'removed', 'jobId', id, 'prev', state)
  return state
end
