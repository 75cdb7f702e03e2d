-- Removing a job that is not in flight: queue.remove's (remove-22.lua) and clean's of the waiting states
-- (cleanWaiting-10.lua), one logic for both, so a job cleaned leaves exactly what a job removed leaves.
-- `q` holds the queue's keys { wait, delayed, completed, failed, reserved, reservedScores, prioritized,
-- waitingChildren, handoffs, meta, events, listened }; `f` the job's fields { state, deid, parentKey,
-- parent, deps }, read by the caller with those it needs itself. Needs events, releaseDeduplication,
-- handoff and parents.

-- Takes the job out of the one structure its state names: one removal, O(log n) except in `wait`, where
-- LREM walks the list (as every Redis list queue's remove does; clean takes its jobs out of `wait` itself,
-- in one LREM per call).
local function leaveLine(q, id, state)
  if state == 'wait' or state == 'prioritized' then
    -- A waiting job may be reserved by a busy worker for its next call (see takeJobs.lua).
    if rcall('ZREM', q.reserved, id) == 1 then
      rcall('HDEL', q.reservedScores, id)
    elseif state == 'wait' then
      rcall('LREM', q.wait, 0, id)
    else
      rcall('ZREM', q.prioritized, id)
    end
  elseif state == 'delayed' then
    rcall('ZREM', q.delayed, id)
  elseif state == 'waiting-children' then
    rcall('ZREM', q.waitingChildren, id)
  else
    rcall('ZREM', q.completed, id)
    rcall('ZREM', q.failed, id)
  end
end

-- The rest of the removal, once the job is out of its line: the deduplication id it holds without a ttl,
-- its parent told (unless `tellParent` is false: the parent goes too), its hash, log and flow keys (`jobKeys`:
-- { job, logs, dependencies, processed, failed, unsuccessful }) and `removed`. Returns the outbox entry
-- for the caller to deliver (lib/flows/handoffs.ts), '' for none.
local function dropJob(q, id, jobKeys, f, tellParent)
  releaseDeduplication(q.meta, f[2], id)
  local entry = ''
  if f[3] and f[1] ~= 'completed' and tellParent then
    -- An outcome not yet told (a failure under a policy) is the one the parent must learn: it stays, and goes
    -- back for the caller to deliver, rather than being overwritten by `removed`.
    entry = rcall('HGET', q.handoffs, id) or handOff(q.handoffs, id, f[3], f[4], 'removed', '')
  end
  rcall('UNLINK', unpack(jobKeys))
  if f[5] then
    countOutParents(q.meta, 1)
  end
  emit(q, 'removed', 'jobId', id, 'prev', f[1])
  return entry
end
