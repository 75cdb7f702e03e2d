-- Takes a job out of the in-flight state: no lease, no index entry, no stalled mark. Every move out of
-- `active` goes through here, so the lease index and the stalled set never keep a stale id. The caller
-- clears the job's owner (its `token` field) in the HSET that records the job's new state.
local function leaveActive(lockKey, activeKey, stalledKey, id)
  redis.call('ZREM', activeKey, id)
  redis.call('ZREM', stalledKey, id)
  redis.call('DEL', lockKey)
end
