-- Releases a deduplication id held without a ttl (meta's field `de:<deid>`, see deduplicate.lua) when job
-- `id` holds it: the job completed, failed for good, or was removed. `deid` is the job's field, nil for a
-- job added without a deduplication (the callers read it with fields they read anyway: no command then).
local function releaseDeduplication(metaKey, deid, id)
  if deid then
    local field = 'de:' .. deid
    if redis.call('HGET', metaKey, field) == id then
      redis.call('HDEL', metaKey, field)
    end
  end
end
