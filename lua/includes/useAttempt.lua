-- Spends one attempt of a job that has left `active`. While attempts remain and the error is not final
-- (`retry.final`: the processor threw an UnrecoverableError), the job goes back to `wait` (at the front
-- when `retry.front`: a recovered stall is served next), or to `delayed` for `retry.delayMs` (a backoff,
-- kept in `lastDelay` while it waits);
-- else to `failed` with `reason`, counted in meta's `failedNew` for the reaper's alarm. Emits as BullMQ
-- does: `waiting` or `delayed` for a retry; for a final failure `failed`, then `retries-exhausted` when
-- it used the last attempt. `q` holds the queue's keys { wait, delayed, marker, meta, events, listened }.
-- `retry.stack` is the error's stack (the processor's; none for a stall): kept in the job's `stacktrace`.
-- Returns the new state; a failed job is filed under `failed` by the caller, with its retention
-- (fileFinished, retention.lua). Needs the releaseDeduplication include.
-- The stacks of a job's failed runs, BullMQ's `stacktrace`: a JSON array, oldest first, of at most the
-- job's stackTraceLimit newest (0: none kept). Written only when a run fails with a stack.
local function keepStack(jobKey, stack, stored, limit)
  if stack == nil or stack == '' or limit <= 0 then
    return
  end
  local list = stored and cjson.decode(stored) or {}
  list[#list + 1] = stack
  while #list > limit do
    table.remove(list, 1)
  end
  redis.call('HSET', jobKey, 'stacktrace', cjson.encode(list))
end

local function useAttempt(jobKey, q, id, now, reason, retry)
  local made = redis.call('HINCRBY', jobKey, 'attemptsMade', 1)
  local f = redis.call('HMGET', jobKey, 'attempts', 'stacktrace', 'stackTraceLimit', 'deid')
  local attempts = tonumber(f[1]) or DEFAULT_ATTEMPTS
  keepStack(jobKey, retry.stack, f[2], tonumber(f[3]) or DEFAULT_STACK_TRACE_LIMIT)
  -- Every failed attempt's reason, retried or not, is the job's failedReason, as BullMQ stores it (a retried
  -- one's is lastError too, kept past an operator's retry, which clears failedReason). A job that never fails has neither.
  redis.call('HSET', jobKey, 'failedReason', reason)
  if made >= attempts or retry.final then
    redis.call('HSET', jobKey, 'state', 'failed', 'finishedOn', now)
    redis.call('HINCRBY', q.meta, 'failedNew', 1)
    releaseDeduplication(q.meta, f[4], id)
    emit(q, 'failed', 'jobId', id, 'failedReason', reason, 'prev', 'active')
    if made >= attempts then
      emit(q, 'retries-exhausted', 'jobId', id, 'attemptsMade', made)
    end
    return 'failed'
  end
  if retry.delayMs > 0 then
    -- `lastDelay`: BullMQ's job.delay is the backoff while the retry waits it out (job-codec.ts reads it).
    redis.call('HSET', jobKey, 'lastError', reason, 'lastDelay', retry.delayMs)
    local due = now + retry.delayMs
    enterDelayed(jobKey, q, id, due)
    emit(q, 'delayed', 'jobId', id, 'delay', due)
    return 'delayed'
  end
  redis.call('HSET', jobKey, 'lastError', reason)
  enterWait(jobKey, q, id, now, retry.front)
  emit(q, 'waiting', 'jobId', id, 'prev', 'active')
  return 'wait'
end
