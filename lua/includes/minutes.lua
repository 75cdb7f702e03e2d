-- Finished jobs per minute over the last hour, for the dashboard's chart: the `metrics` hash holds, per
-- minute m (ms / 60000) in which jobs finished, 'c'..m (completed) and 'f'..m (failed), and `last`, the
-- latest minute counted. One write per finish call (n jobs at once), nothing while idle; the first count of a minute
-- also drops the minutes of the last one's hour that are now older than an hour (at most 120 fields,
-- named, never a scan), so the hash never holds more than the last hour.
local function countFinished(metricsKey, state, now, n)
  n = n or 1
  local minute = math.floor(now / 60000)
  if rcall('HINCRBY', metricsKey, (state == 'completed' and 'c' or 'f') .. minute, n) ~= n then
    return
  end
  local last = tonumber(rcall('HGET', metricsKey, 'last'))
  if last == minute then
    return
  end
  if last and last < minute then
    local stale = {}
    for m = last - 59, math.min(last, minute - 60) do
      stale[#stale + 1] = 'c' .. m
      stale[#stale + 1] = 'f' .. m
    end
    if #stale > 0 then
      rcall('HDEL', metricsKey, unpack(stale))
    end
  end
  rcall('HSET', metricsKey, 'last', minute)
end
