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
-- @include now
-- @include takeJobs
local candidates = { firstKey = 4, firstArg = 3, count = #ARGV - 2 }

return takeJobs(waitKey, activeKey, markerKey, workerToken, leaseMs, nowMs(), candidates)
