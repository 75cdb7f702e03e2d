--[[
  Extends one run's lease (BullMQ's job.extendLock(token, duration)): for a processor that wants a longer
  lease than the worker's heartbeat keeps, or a run driven by hand. Only the lease's holder extends it;
  its deadline in the lease index follows, and a stalled mark from a first sweep is cleared (the holder
  is alive), as a heartbeat does (extend-2.lua). A lease that lapsed is not taken back here.

  KEYS[1] lease    STRING <prefix>:{q}:<id>:lock
  KEYS[2] active   ZSET   <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[3] stalled  ZSET   <prefix>:{q}:stalled

  ARGV[1] job id
  ARGV[2] the run's token
  ARGV[3] the lease's new duration, from now (ms)

  Returns 1 when extended, 0 when the token does not hold the lease (nothing changed), as BullMQ does.
]]
local rcall = redis.call
local lockKey, activeKey, stalledKey = KEYS[1], KEYS[2], KEYS[3]
local id, token, ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
-- @include now

if rcall('GET', lockKey) ~= token then
  return 0
end
local deadline = string.format('%d', nowMs() + ms)
rcall('PEXPIREAT', lockKey, deadline)
rcall('ZADD', activeKey, 'XX', deadline, id)
rcall('ZREM', stalledKey, id)
return 1
