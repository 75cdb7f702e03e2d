--[[
  Records a job's progress (JSON text) and emits `progress`. From a processor, fenced by its run's token:
  a run that no longer owns the job (its lease was lost and the job recovered, finished or taken by
  another run) changes nothing.

  KEYS[1] job       HASH   <prefix>:{q}:<id>
  KEYS[2] lease     STRING <prefix>:{q}:<id>:lock
  KEYS[3] meta      HASH   <prefix>:{q}:meta
  KEYS[4] events    STREAM <prefix>:{q}:events
  KEYS[5] listened  ZSET   <prefix>:{q}:listened

  ARGV[1] job id
  ARGV[2] the run's token, or "" (not from a processor: any job that exists)
  ARGV[3] the progress (JSON text)

  Returns "ok", "missing" (no such job) or "lost" (the run does not own the job).
]]
local rcall = redis.call
local jobKey, lockKey = KEYS[1], KEYS[2]
local q = { meta = KEYS[3], events = KEYS[4], listened = KEYS[5] }
local id, token, progress = ARGV[1], ARGV[2], ARGV[3]
-- @include events
-- @include owner

local status = checkOwner(jobKey, lockKey, token)
if status ~= 'ok' then
  return status
end
rcall('HSET', jobKey, 'progress', progress)
emit(q, 'progress', 'jobId', id, 'data', progress)
return 'ok'
