-- Takes a job out of the in-flight state: no lease, no index entry, no stalled mark, no owner. Every move
-- out of `active` goes through here, so the lease index and the stalled set never keep a stale id.
local function leaveActive(jobKey, lockKey, activeKey, stalledKey, id)
  redis.call('ZREM', activeKey, id)
  redis.call('ZREM', stalledKey, id)
  redis.call('DEL', lockKey)
  redis.call('HDEL', jobKey, 'token')
end
