-- Takes candidate jobs from the right of `wait` and gives each a lease. `taker` is the worker:
-- { token, leaseMs, name, maxBytes }. `at` says where the candidates are: candidate i (i = 0 ..
-- at.count - 1) is ARGV[at.firstArg + i], with its job hash at KEYS[at.firstKey + 2i] and its lease at
-- KEYS[at.firstKey + 2i + 1]. A candidate that is no longer near the tail of `wait` (another worker took
-- it) is skipped. The reply holds whole jobs, so it is bounded in bytes too: once a job is taken, a
-- candidate whose data would bring the total past taker.maxBytes stays in `wait` for the next call.
-- Returns { { id, token, hash }, ... }.
local function takeJobs(waitKey, activeKey, markerKey, taker, now, at)
  local firstKey, firstArg, n = at.firstKey, at.firstArg, at.count
  -- Candidates were read from the tail; look only that far (plus what may have been pushed since), so a
  -- long `wait` list never costs a full scan.
  local window = 2 * n + 64
  local taken, bytes = {}, 0
  local deadline = now + taker.leaseMs
  for i = 0, n - 1 do
    local id = ARGV[firstArg + i]
    local jobKey, lockKey = KEYS[firstKey + 2 * i], KEYS[firstKey + 2 * i + 1]
    local size = redis.call('HSTRLEN', jobKey, 'data')
    if #taken > 0 and bytes + size > taker.maxBytes then
      break
    end
    if redis.call('LPOS', waitKey, id, 'RANK', -1, 'MAXLEN', window) then
      redis.call('LREM', waitKey, -1, id)
      if redis.call('EXISTS', jobKey) == 1 then
        local started = redis.call('HINCRBY', jobKey, 'attemptsStarted', 1)
        local token = taker.token .. ':' .. started
        redis.call('SET', lockKey, token, 'PX', taker.leaseMs)
        redis.call('ZADD', activeKey, deadline, id)
        redis.call('HSET', jobKey, 'state', 'active', 'token', token, 'startedOn', now, 'workerName', taker.name)
        taken[#taken + 1] = { id, token, redis.call('HGETALL', jobKey) }
        bytes = bytes + size
      end
    elseif redis.call('ZSCORE', activeKey, id) then
      -- In flight under this worker's token: a replay of a call whose reply was lost (or a run the worker
      -- already has, which it skips). Hand it back rather than strand it until a sweep charges a stall.
      local token = redis.call('HGET', jobKey, 'token')
      local holder = redis.call('GET', lockKey)
      if token and string.sub(token, 1, #taker.token + 1) == taker.token .. ':' and (holder == false or holder == token) then
        redis.call('SET', lockKey, token, 'PX', taker.leaseMs)
        redis.call('ZADD', activeKey, deadline, id)
        taken[#taken + 1] = { id, token, redis.call('HGETALL', jobKey) }
        bytes = bytes + size
      end
    end
  end
  -- Chain wake-ups: another idle worker wakes while work remains.
  if #taken > 0 and redis.call('LLEN', waitKey) > 0 then
    redis.call('ZADD', markerKey, 0, '0')
  end
  return taken
end
