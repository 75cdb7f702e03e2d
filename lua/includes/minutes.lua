-- Finished jobs per minute over the last hour, for the dashboard's chart: the `metrics` hash holds, per
-- slot s = minute % 60, 't'..s (the minute: ms / 60000), 'c'..s (completed) and 'f'..s (failed). A slot
-- holding an older minute is reset first, so the hash never holds more than the last hour (180 fields).
-- Costs a read and a write per finished job, nothing while idle.
local function countFinished(metricsKey, state, now)
  local minute = math.floor(now / 60000)
  local slot = tostring(minute % 60)
  if redis.call('HGET', metricsKey, 't' .. slot) ~= tostring(minute) then
    redis.call('HSET', metricsKey, 't' .. slot, tostring(minute), 'c' .. slot, '0', 'f' .. slot, '0')
  end
  redis.call('HINCRBY', metricsKey, (state == 'completed' and 'c' or 'f') .. slot, 1)
end
