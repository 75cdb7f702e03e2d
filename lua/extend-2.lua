--[[
  Renews a batch of leases held by one worker: the LockManager's heartbeat, one call per tick. It is the
  hottest script, so a lease costs one key and one argument, the lease's key names the job (the id is
  what stands between the queue's key prefix and ":lock"), and the reads and the index update are one
  call each. A lease that lapsed is not judged here: it is reported back for reclaim-2.lua, which needs
  the job's hash.

  KEYS[1] active   ZSET  <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[2] stalled  ZSET  <prefix>:{q}:stalled
  KEYS[2 + i]      STRING lease of job i (i = 1 .. n): <prefix>:{q}:<id>:lock

  ARGV[1] lease duration (ms)
  ARGV[1 + i] token of lease i

  Returns one code per lease: 1 renewed, 3 lapsed (ask reclaim-2.lua), 0 lost (held by another token).
]]
local rcall = redis.call
local activeKey, stalledKey = KEYS[1], KEYS[2]
local leaseMs = tonumber(ARGV[1])
local n = #ARGV - 1
-- Every key of the queue starts with this; a lease key is this .. id .. ':lock'.
local base = string.sub(activeKey, 1, -7)
-- @include now

local now = nowMs()
local holders = rcall('MGET', unpack(KEYS, 3, n + 2))
local codes, deadlines, renewed = {}, {}, {}
for i = 1, n do
  local holder = holders[i]
  if holder == ARGV[1 + i] then
    rcall('PEXPIRE', KEYS[2 + i], leaseMs)
    local id = string.sub(KEYS[2 + i], #base + 1, -6)
    deadlines[#deadlines + 1] = now + leaseMs
    deadlines[#deadlines + 1] = id
    renewed[#renewed + 1] = id
    codes[i] = 1
  elseif holder == false then
    codes[i] = 3
  else
    codes[i] = 0
  end
end
if #renewed > 0 then
  rcall('ZADD', activeKey, 'XX', unpack(deadlines))
  -- A renewal proves the worker alive: clear any mark from a first sweep.
  if rcall('ZCARD', stalledKey) > 0 then
    rcall('ZREM', stalledKey, unpack(renewed))
  end
end
return codes
