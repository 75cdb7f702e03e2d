--[[
  Renews a batch of leases held by one worker: the LockManager's heartbeat, one call per tick. It is the
  hottest script, so the reads and the index update are one call each. A lease that lapsed is not judged
  here: it is reported back for reclaim-2.lua, which needs the job's hash.

  KEYS[1] active   ZSET  <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[2] stalled  ZSET  <prefix>:{q}:stalled
  KEYS[2 + i]      STRING lease of job i (i = 1 .. n): <prefix>:{q}:<id>:lock

  ARGV[1] lease duration (ms)
  ARGV[2i]     id of job i
  ARGV[2i + 1] token of lease i

  Returns one code per lease: 1 renewed, 3 lapsed (ask reclaim-2.lua), 0 lost (held by another token).
]]
local rcall = redis.call
local LOST, RENEWED, LAPSED = 0, 1, 3
local activeKey, stalledKey = KEYS[1], KEYS[2]
local leaseMs = tonumber(ARGV[1])
local n = #KEYS - 2
-- @include now

local now = nowMs()
local holders = rcall('MGET', unpack(KEYS, 3, n + 2))
local codes, deadlines, renewed = {}, {}, {}
for i = 1, n do
  local holder = holders[i]
  if holder == ARGV[2 * i + 1] then
    local id = ARGV[2 * i]
    rcall('PEXPIRE', KEYS[2 + i], leaseMs)
    deadlines[#deadlines + 1] = now + leaseMs
    deadlines[#deadlines + 1] = id
    renewed[#renewed + 1] = id
    codes[i] = RENEWED
  elseif holder == false then
    codes[i] = LAPSED
  else
    codes[i] = LOST
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
