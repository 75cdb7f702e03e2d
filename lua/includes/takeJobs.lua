-- The job fields a worker needs, in the order lib/job.ts's jobFromFields reads them (one HMGET, not a
-- whole HGETALL: bookkeeping fields, and what the take itself sets, do not travel back).
local JOB_FIELDS = { 'name', 'data', 'attempts', 'attemptsMade', 'attemptsStarted', 'createdOn', 'lastError', 'retried', 'progress' }
local F_DATA, F_ATTEMPTS, F_STARTS = 2, 3, 5

-- Takes candidate jobs and gives each a lease. `taker` is the worker: { token, leaseMs (a string, as
-- Redis gets it), name, maxBytes }. `at` says where the candidates are: candidate i (i = 0 ..
-- at.count - 1) is ARGV[at.firstArg + i], with its job hash at KEYS[at.firstKey + 2i] and its lease at
-- KEYS[at.firstKey + 2i + 1]; `at.reserved` says they were reserved by this worker (ZSET `q.reserved`),
-- else read from the tail of `wait`. A candidate no longer there (another worker took it; a reservation
-- that expired went back to `wait`, where it is looked for too) is skipped. The reply holds whole jobs,
-- so it is bounded in bytes: once a job is taken, a candidate whose data would bring the total past
-- taker.maxBytes is left where it is, and so are the candidates after it. While the queue is paused
-- (meta's `paused`) nothing is taken: every candidate is left. Each job taken emits `active`.
-- Returns { { id, token, fields, startedOn }, ... } and the candidates left.
local function takeJobs(q, taker, now, at)
  local firstKey, firstArg, n = at.firstKey, at.firstArg, at.count
  if n > 0 and redis.call('HEXISTS', q.meta, 'paused') == 1 then
    local left = {}
    for i = 0, n - 1 do
      left[#left + 1] = ARGV[firstArg + i]
    end
    return {}, left
  end
  -- Candidates were read from the tail; look only that far (plus what may have been pushed since), so a
  -- long `wait` list never costs a full scan.
  local window = 2 * n + 64
  local taken, left, bytes = {}, {}, 0
  -- Numbers reach redis.call as strings: Redis would otherwise format each one again.
  local nowText, deadline = tostring(now), tostring(now + tonumber(taker.leaseMs))
  for i = 0, n - 1 do
    local id = ARGV[firstArg + i]
    local jobKey, lockKey = KEYS[firstKey + 2 * i], KEYS[firstKey + 2 * i + 1]
    local reserved = at.reserved and redis.call('ZREM', q.reserved, id) == 1
    if reserved or redis.call('LPOS', q.wait, id, 'RANK', -1, 'MAXLEN', window) then
      local f = redis.call('HMGET', jobKey, unpack(JOB_FIELDS))
      local size = f[F_DATA] and #f[F_DATA] or 0
      if #taken > 0 and bytes + size > taker.maxBytes then
        if reserved then
          redis.call('ZADD', q.reserved, deadline, id)
        end
        for k = i, n - 1 do
          left[#left + 1] = ARGV[firstArg + k]
        end
        break
      end
      if not reserved then
        redis.call('LREM', q.wait, -1, id)
      end
      -- A job removed meanwhile leaves only its id behind: drop it.
      if f[F_ATTEMPTS] then
        local started = tostring((tonumber(f[F_STARTS]) or 0) + 1)
        local token = taker.token .. ':' .. started
        redis.call('SET', lockKey, token, 'PX', taker.leaseMs)
        redis.call('ZADD', q.active, deadline, id)
        redis.call('HSET', jobKey, 'state', 'active', 'token', token, 'startedOn', nowText, 'workerName', taker.name, 'attemptsStarted', started)
        f[F_STARTS] = started
        taken[#taken + 1] = { id, token, f, nowText }
        bytes = bytes + size
        emit(q, 'active', 'jobId', id, 'prev', 'waiting')
      end
    elseif redis.call('ZSCORE', q.active, id) then
      -- In flight under this worker's token: a replay of a call whose reply was lost (or a run the worker
      -- already has, which it skips). Hand it back rather than strand it until a sweep charges a stall.
      local token = redis.call('HGET', jobKey, 'token')
      local holder = redis.call('GET', lockKey)
      if token and string.sub(token, 1, #taker.token + 1) == taker.token .. ':' and (holder == false or holder == token) then
        redis.call('SET', lockKey, token, 'PX', taker.leaseMs)
        redis.call('ZADD', q.active, deadline, id)
        taken[#taken + 1] = { id, token, redis.call('HMGET', jobKey, unpack(JOB_FIELDS)), redis.call('HGET', jobKey, 'startedOn') }
      end
    end
  end
  return taken, left
end

-- Reserves up to `n` ids from the tail of `wait` (the next to be served) for this worker's next calls:
-- they leave `wait` for `q.reserved`, scored by when the reservation expires (a sweep returns expired ones
-- to `wait`, served next; a closing worker returns its own at once). Reserving touches no job hash, so a
-- busy worker knows its next candidates without reading `wait` itself, and no two workers get the same.
local function reserveNext(q, n, until_)
  if n <= 0 or redis.call('HEXISTS', q.meta, 'paused') == 1 then
    return {}
  end
  local ids = redis.call('RPOP', q.wait, n)
  if not ids then
    return {}
  end
  local scored, score = {}, tostring(until_)
  for i, id in ipairs(ids) do
    scored[2 * i - 1], scored[2 * i] = score, id
  end
  redis.call('ZADD', q.reserved, unpack(scored))
  return ids
end
