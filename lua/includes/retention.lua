-- Retention: a job's `keep` field (set at add, for `completed`) and `keepFailed` (for `failed`) hold
-- "<count>,<age>" with either part empty for no limit, or "0" to remove the job as soon as it ends; a
-- job without the field has the default (DEFAULT_KEEP, from lib/defaults.json). The age is in seconds,
-- as the user gave it (BullMQ's unit; it may have a fraction): parseKeep turns it into ms, the scripts'
-- unit, in this one place.
-- A finished job is kept in its set, and the set's limits become the finishing job's (`meta` holds them,
-- so the sweep enforces the limits exactly). A set past count + slack asks for a trim (its caller reads
-- the oldest ids and runs trim-2.lua), so trimming costs no round trip per job.
local function parseKeep(text)
  if text == false or text == nil or text == '' then
    return nil, nil
  end
  local sep = string.find(text, ',', 1, true)
  if not sep then
    return tonumber(text), nil
  end
  local age = tonumber(string.sub(text, sep + 1))
  return tonumber(string.sub(text, 1, sep - 1)), age and age * 1000
end

-- Jobs a set may exceed its count by between trims.
local function trimSlack(count)
  return math.max(10, math.ceil(count / 10))
end

-- The job hash field holding the retention of each finished set, and the meta field holding the set's limits.
local KEEP_FIELDS = { completed = { job = 'keep', meta = 'keepCompleted' }, failed = { job = 'keepFailed', meta = 'keepFailed' } }

-- Whether a set that grew from `before` to `size` jobs reached a trim point: count + slack, count + 2 *
-- slack, ... (one trim asked for each time it grows past its count by another slack). At the first point
-- the set is exactly `slack` past its count, which one step of trim-2.lua removes (lib/retention.ts
-- TRIM_BATCH is the slack of the default count): a point one job later left that job to a second read
-- and a second call, per trim.
-- Also returns, for a trim's first ask (the set within a slack of its count before it), how many of the
-- set's oldest ids the caller reads with it (ZRANGE, at most TRIM_BATCH, lib/defaults.json), as its
-- worker's first trim-2.lua call needs them: a read of the worker's own would be a round trip, and each
-- wakes Redis, which on a virtual machine costs it more than the read. A later ask finds trims lagging, the
-- worker's likely still running (it takes no ids then): its trim reads its own.
local function trimDue(count, before, size)
  if count == nil then
    return false
  end
  local slack = trimSlack(count)
  local due = size >= count + slack and math.floor((size - count) / slack) > math.floor((math.max(before, count) - count) / slack)
  return due, due and before < count + slack and math.min(slack, TRIM_BATCH) or nil
end

-- The set's limits become those of the job that finished last: a read, not a write, per call.
local function keepLimits(q, state, keep)
  local field = KEEP_FIELDS[state].meta
  if rcall('HGET', q.meta, field) ~= keep then
    rcall('HSET', q.meta, field, keep)
  end
end

-- Files a job that just ended in `state` ('completed' or 'failed') under that set at `now` (in order
-- within its millisecond: score.lua), or removes it at once with its log (`logsKey`) and, for a flow's
-- parent, its four flow keys (`flowKeys`, or nil); returns the set's name when it is now past its count by
-- another slack (a trim is due), else '', and true when it removed the job (the caller counts a parent out
-- of meta's `parents`), and for a trim's first ask how many oldest ids to read with it (trimDue). `q`
-- holds the queue's keys { completed, failed, meta }; `keep` is the job's field when the caller read it.
local function fileFinished(jobKey, logsKey, q, state, id, now, keep, flowKeys)
  local fields = KEEP_FIELDS[state]
  local setKey = q[state]
  if keep == nil then
    keep = rcall('HGET', jobKey, fields.job)
  end
  if keep == false then
    keep = DEFAULT_KEEP[state]
  end
  local count = parseKeep(keep)
  if count == 0 then
    rcall('UNLINK', jobKey, logsKey, unpack(flowKeys or {}))
    return '', true
  end
  rcall('ZADD', setKey, scoreAt(setKey, now), id)
  keepLimits(q, state, keep)
  -- One finish asks for a trim each time the set grows by another `slack` jobs past its count (trimDue).
  -- No lease is held, so a worker that dies (or closes) mid-trim only means the next such finish asks
  -- another: a set holds at most count + 2 * slack jobs between sweeps, plus those finished while a trim
  -- runs. Two trims that overlap are harmless (trim-2.lua re-checks each id).
  if count ~= nil then
    local size = rcall('ZCARD', setKey)
    local due, firstIds = trimDue(count, size - 1, size)
    if due then
      return state, false, firstIds
    end
  end
  return ''
end
