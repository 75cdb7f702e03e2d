-- A job scheduler's iterations: jobs with id repeat:<sid>:<due ms>, made from the template the scheduler
-- hash holds (the same field names as a job's). An iteration always waits in `delayed`, even when it is
-- due at once, so that its promotion (iterate-11.lua) makes the next one: the schedule advances whoever
-- promotes, a worker or the sweep, with no host of its own. Needs enter, events and score.
local TEMPLATE = { 'name', 'data', 'attempts', 'backoff', 'keep', 'keepFailed', 'keepLogs', 'priority', 'stackTraceLimit' }

-- Creates iteration `id` of scheduler `sid`, due at `due`, unless it exists (another producer made it:
-- the deterministic id makes that a no-op). Returns true when created.
local function createIteration(schedulerKey, jobKey, q, sid, id, due, now)
  if redis.call('EXISTS', jobKey) == 1 then
    return false
  end
  local t = redis.call('HMGET', schedulerKey, unpack(TEMPLATE))
  local fields = { 'createdOn', tostring(now), 'repeatJobKey', sid }
  for i, name in ipairs(TEMPLATE) do
    if t[i] then
      fields[#fields + 1] = name
      fields[#fields + 1] = t[i]
    end
  end
  redis.call('HSET', jobKey, unpack(fields))
  emit(q, 'added', 'jobId', id, 'name', t[1] or sid)
  enterDelayed(jobKey, q, id, due)
  emit(q, 'delayed', 'jobId', id, 'delay', due)
  return true
end

-- Moves a due iteration (in `delayed`) into line, as promote-7.lua moves any job.
local function promoteIteration(jobKey, q, id, now)
  redis.call('ZREM', q.delayed, id)
  redis.call('HDEL', jobKey, 'dueAt')
  enterWait(jobKey, q, id, now, false)
  emit(q, 'waiting', 'jobId', id, 'prev', 'delayed')
end
