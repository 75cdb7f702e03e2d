-- Spends one attempt of a job that has left `active`: back to `wait` while attempts remain, else to
-- `failed` with `reason`. Returns the job's new state. `served next` pushes right, where workers take from.
local function useAttempt(jobKey, waitKey, failedKey, markerKey, id, now, reason, servedNext)
  local made = redis.call('HINCRBY', jobKey, 'attemptsMade', 1)
  local attempts = tonumber(redis.call('HGET', jobKey, 'attempts')) or 1
  if made >= attempts then
    redis.call('HSET', jobKey, 'state', 'failed', 'failedReason', reason, 'finishedOn', now)
    redis.call('ZADD', failedKey, now, id)
    return 'failed'
  end
  redis.call('HSET', jobKey, 'state', 'wait', 'lastError', reason)
  if servedNext then
    redis.call('RPUSH', waitKey, id)
  else
    redis.call('LPUSH', waitKey, id)
  end
  redis.call('ZADD', markerKey, 0, '0')
  return 'wait'
end
