-- Spends one attempt of a job that has left `active`. While attempts remain and the error is not final
-- (`retry.final`: the processor threw an UnrecoverableError), the job goes back to `wait` (at the front
-- when `retry.front`: a recovered stall is served next), or to `delayed` for `retry.delayMs` (a backoff);
-- else to `failed` with `reason`, counted in meta's `failedNew` for the reaper's alarm. Emits as BullMQ
-- does: `waiting` or `delayed` for a retry; for a final failure `failed`, then `retries-exhausted` when
-- it used the last attempt. `q` holds the queue's keys { wait, delayed, marker, meta, events, listened }.
-- Returns the new state; a failed job is filed under `failed` by the caller, with its retention
-- (fileFinished, retention.lua).
local function useAttempt(jobKey, q, id, now, reason, retry)
  local made = redis.call('HINCRBY', jobKey, 'attemptsMade', 1)
  local attempts = tonumber(redis.call('HGET', jobKey, 'attempts')) or 1
  if made >= attempts or retry.final then
    redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', reason, 'finishedOn', now)
    redis.call('HINCRBY', q.meta, 'failedNew', 1)
    emit(q, 'failed', 'jobId', id, 'failedReason', reason, 'prev', 'active')
    if made >= attempts then
      emit(q, 'retries-exhausted', 'jobId', id, 'attemptsMade', made)
    end
    return 'failed'
  end
  redis.call('HSET', jobKey, 'lastError', reason)
  if retry.delayMs > 0 then
    local due = now + retry.delayMs
    enterDelayed(jobKey, q, id, due)
    emit(q, 'delayed', 'jobId', id, 'delay', due)
    return 'delayed'
  end
  enterWait(jobKey, q, id, now, retry.front)
  emit(q, 'waiting', 'jobId', id, 'prev', 'active')
  return 'wait'
end
