-- Spends one attempt of a job that has left `active`. While attempts remain the job goes back to `wait`
-- (at the front when `retry.front`: a recovered stall is served next), or to `delayed` for
-- `retry.delayMs` (a backoff); else to `failed` with `reason`, counted in meta's `failedNew` for the
-- reaper's alarm. `q` holds the queue's keys { wait, delayed, marker, meta }. Returns the new state; a
-- failed job is filed under `failed` by the caller, with its retention (fileFinished, retention.lua).
local function useAttempt(jobKey, q, id, now, reason, retry)
  local made = redis.call('HINCRBY', jobKey, 'attemptsMade', 1)
  local attempts = tonumber(redis.call('HGET', jobKey, 'attempts')) or 1
  if made >= attempts then
    redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', reason, 'finishedOn', now)
    redis.call('HINCRBY', q.meta, 'failedNew', 1)
    return 'failed'
  end
  redis.call('HSET', jobKey, 'lastError', reason)
  if retry.delayMs > 0 then
    enterDelayed(jobKey, q, id, now + retry.delayMs)
    return 'delayed'
  end
  enterWait(jobKey, q, id, now, retry.front)
  return 'wait'
end
