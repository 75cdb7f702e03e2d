-- Counts `n` jobs out of meta's `parents` (the queue's jobs with `deps`: they hold flow keys, trim-2.lua),
-- as they go with their flow keys. The field goes at 0, so a queue whose last parent went trims as one that
-- never had any. Never below 0: a parent written before the count began (its queue has the legacy `flows`,
-- which keeps trims looking for parents anyway) was never counted in.
local function countOutParents(metaKey, n)
  if n > 0 and redis.call('HINCRBY', metaKey, 'parents', -n) <= 0 then
    redis.call('HDEL', metaKey, 'parents')
  end
end
