--[[
  Renews a batch of leases held by one worker: the LockManager's heartbeat, one call per tick.

  KEYS[1] active   ZSET  <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[2] stalled  ZSET  <prefix>:{q}:stalled
  KEYS[3 + 2i]     HASH  job i        (i = 0 .. n-1)
  KEYS[4 + 2i]     STRING lease of job i

  ARGV[1] lease duration (ms)
  ARGV[2 + 2i] job id i
  ARGV[3 + 2i] token i

  Returns one code per job: 1 renewed, 2 lease had lapsed but the job was still ours and not recovered, so
  it was taken back, 0 lost (recovered, finished, or owned by another token).
]]
local rcall = redis.call
local activeKey, stalledKey = KEYS[1], KEYS[2]
local leaseMs = tonumber(ARGV[1])
local n = (#ARGV - 1) / 2
-- @include now

local now = nowMs()
-- One call each for the reads and the index update: per-command overhead dominates a heartbeat.
local lockKeys = {}
for i = 0, n - 1 do
  lockKeys[i + 1] = KEYS[4 + 2 * i]
end
local holders = rcall('MGET', unpack(lockKeys))
local codes, deadlines, renewed = {}, {}, {}
for i = 0, n - 1 do
  local id, token = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  local holder = holders[i + 1]
  local code = 0
  if holder == token then
    code = 1
    rcall('PEXPIRE', lockKeys[i + 1], leaseMs)
  elseif holder == false and rcall('ZSCORE', activeKey, id) and rcall('HGET', KEYS[3 + 2 * i], 'token') == token then
    -- The worker was paused past its lease but no sweep recovered the job: it is still the owner.
    code = 2
    rcall('SET', lockKeys[i + 1], token, 'PX', leaseMs)
  end
  if code > 0 then
    deadlines[#deadlines + 1] = now + leaseMs
    deadlines[#deadlines + 1] = id
    renewed[#renewed + 1] = id
  end
  codes[i + 1] = code
end
if #deadlines > 0 then
  rcall('ZADD', activeKey, 'XX', unpack(deadlines))
  -- A renewal proves the worker alive: clear any mark from a first sweep.
  if rcall('ZCARD', stalledKey) > 0 then
    rcall('ZREM', stalledKey, unpack(renewed))
  end
end
return codes
