--[[
  Replaces a job's data (BullMQ's job.updateData): a long job's checkpoint. Not fenced by a run's token,
  as in BullMQ: any holder of the job may write its data, in any state.

  KEYS[1] job  HASH  <prefix>:{q}:<id>

  ARGV[1] the data (JSON text, validated and size-checked by the caller)

  Returns "ok", or "missing" (no such job: nothing written).
]]
local jobKey = KEYS[1]
if redis.call('EXISTS', jobKey) == 0 then
  return 'missing'
end
redis.call('HSET', jobKey, 'data', ARGV[1])
return 'ok'
