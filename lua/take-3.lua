--[[
  Takes candidate jobs from the right of `wait` and gives each a lease, in one step, so a crash can never
  leave a job out of `wait` without a lease. The caller read the candidates (LRANGE) to pass their keys;
  a candidate another worker took meanwhile is skipped.

  KEYS[1] wait     LIST  <prefix>:{q}:wait
  KEYS[2] active   ZSET  <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[3] marker   ZSET  <prefix>:{q}:marker
  KEYS[4 + 2i]     HASH  job i       (i = 0 .. n-1)
  KEYS[5 + 2i]     STRING lease of job i

  ARGV[1] worker token (the lease value is "<worker token>:<start number>")
  ARGV[2] lease duration (ms)
  ARGV[3..] candidate job ids, in the order of KEYS pairs

  Returns { { id, token, { job hash as field, value, ... } }, ... } for the jobs taken.
]]
local rcall = redis.call
local waitKey, activeKey, markerKey = KEYS[1], KEYS[2], KEYS[3]
local workerToken, leaseMs = ARGV[1], tonumber(ARGV[2])
local n = #ARGV - 2
-- @include now

local now = nowMs()
-- Candidates were read from the tail; only look that far (plus what may have been pushed since), so a
-- long `wait` list never costs a full scan.
local window = 2 * n + 64
local taken = {}
for i = 0, n - 1 do
  local id = ARGV[3 + i]
  local jobKey, lockKey = KEYS[4 + 2 * i], KEYS[5 + 2 * i]
  if rcall('LPOS', waitKey, id, 'RANK', -1, 'MAXLEN', window) then
    rcall('LREM', waitKey, -1, id)
    if rcall('EXISTS', jobKey) == 1 then
      local started = rcall('HINCRBY', jobKey, 'attemptsStarted', 1)
      local token = workerToken .. ':' .. started
      rcall('SET', lockKey, token, 'PX', leaseMs)
      rcall('ZADD', activeKey, now + leaseMs, id)
      rcall('HSET', jobKey, 'state', 'active', 'token', token, 'startedOn', now)
      taken[#taken + 1] = { id, token, rcall('HGETALL', jobKey) }
    end
  end
end
-- Chain wake-ups: another idle worker wakes while work remains.
if #taken > 0 and rcall('LLEN', waitKey) > 0 then
  rcall('ZADD', markerKey, 0, '0')
end
return taken
