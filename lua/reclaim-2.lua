--[[
  Takes back leases that lapsed while their worker was paused (a long GC, a stopped process), when no
  sweep has recovered the job yet: the run still owns the job, so it keeps it. A job recovered, finished
  or re-taken by another run is reported lost.

  KEYS[1] active   ZSET  <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[2] stalled  ZSET  <prefix>:{q}:stalled
  KEYS[3 + 2i]     HASH  job i        (i = 0 .. n-1)
  KEYS[4 + 2i]     STRING lease of job i

  ARGV[1] lease duration (ms)
  ARGV[2 + 2i] job id i
  ARGV[3 + 2i] token i

  Returns one code per job: 2 taken back, 1 renewed (the lease was back in place), 0 lost.
]]
local rcall = redis.call
local LOST, RENEWED, RECLAIMED = 0, 1, 2
local activeKey, stalledKey = KEYS[1], KEYS[2]
local leaseMs = tonumber(ARGV[1])
local n = (#ARGV - 1) / 2
-- @include now

local now = nowMs()
local codes = {}
for i = 0, n - 1 do
  local id, token = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  local jobKey, lockKey = KEYS[3 + 2 * i], KEYS[4 + 2 * i]
  local holder = rcall('GET', lockKey)
  local code = LOST
  if holder == token then
    code = RENEWED
  elseif holder == false and rcall('ZSCORE', activeKey, id) and rcall('HGET', jobKey, 'token') == token then
    code = RECLAIMED
  end
  if code ~= LOST then
    rcall('SET', lockKey, token, 'PX', leaseMs)
    rcall('ZADD', activeKey, 'XX', now + leaseMs, id)
    rcall('ZREM', stalledKey, id)
  end
  codes[i + 1] = code
end
return codes
