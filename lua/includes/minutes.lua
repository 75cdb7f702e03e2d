-- Finished jobs per minute over the last hour, for the dashboard's chart: the `metrics` hash holds, per
-- minute m (ms / 60000) in which jobs finished, 'c'..m (completed) and 'f'..m (failed). One write per
-- finished job, nothing while idle; the first count of a minute also drops the fields older than an hour,
-- so the hash holds at most the last hour (120 fields) whatever the gaps.
local function countFinished(metricsKey, state, now)
  local minute = math.floor(now / 60000)
  if redis.call('HINCRBY', metricsKey, (state == 'completed' and 'c' or 'f') .. minute, 1) == 1 then
    local stale = {}
    for _, field in ipairs(redis.call('HKEYS', metricsKey)) do
      if (tonumber(string.sub(field, 2)) or 0) <= minute - 60 then
        stale[#stale + 1] = field
      end
    end
    if #stale > 0 then
      redis.call('HDEL', metricsKey, unpack(stale))
    end
  end
end
