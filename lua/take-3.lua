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
  ARGV[3] worker name (recorded on each job taken)
  ARGV[4] most bytes of job data in the reply (at least one job is taken whatever its size)
  ARGV[5..] candidate job ids, in the order of KEYS pairs

  Returns { { id, token, { job hash as field, value, ... } }, ... } for the jobs taken.
]]
local rcall = redis.call
local waitKey, activeKey, markerKey = KEYS[1], KEYS[2], KEYS[3]
local taker = { token = ARGV[1], leaseMs = tonumber(ARGV[2]), name = ARGV[3], maxBytes = tonumber(ARGV[4]) }
local candidates = { firstKey = 4, firstArg = 5, count = #ARGV - 4 }
-- @include now
-- @include takeJobs

return takeJobs(waitKey, activeKey, markerKey, taker, nowMs(), candidates)
