-- Releases a deduplication id held without a ttl (meta's field `de:<deid>`, see deduplicate.lua) when job
-- `id` holds it: the job completed, failed for good, or was removed. `deid` is the job's field, nil for a
-- job added without a deduplication (the callers read it with fields they read anyway: no command then).
-- A next job stored for the id (keepLastIfActive, nextJob.lua) goes with it, in the same HDEL: as BullMQ's
-- removal drops it; a finish that adds it read it first.
local function releaseDeduplication(metaKey, deid, id)
  if deid then
    local field = 'de:' .. deid
    if redis.call('HGET', metaKey, field) == id then
      redis.call('HDEL', metaKey, field, 'dn:' .. deid)
    end
  end
end

-- The same for the jobs of `ids` at once, `deids` theirs (a finish's completed runs): one HMGET and at
-- most one HDEL a call, however many jobs.
local function releaseDeduplications(metaKey, deids, ids)
  if #deids == 0 then
    return
  end
  local fields = {}
  for i, deid in ipairs(deids) do
    fields[i] = 'de:' .. deid
  end
  local holders = redis.call('HMGET', metaKey, unpack(fields))
  local held = {}
  for i = 1, #fields do
    if holders[i] == ids[i] then
      held[#held + 1] = fields[i]
    end
  end
  if #held > 0 then
    redis.call('HDEL', metaKey, unpack(held))
  end
end
