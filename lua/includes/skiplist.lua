-- Keeps a sorted set that is updated many members at a time (the lease index) in Redis's skiplist
-- encoding. Below zset-max-listpack-entries (128) Redis stores it as a listpack, where every update
-- scans and moves the whole list: a heartbeat re-scoring half of 100 leases then costs more than the
-- renewals. A member longer than zset-max-listpack-value converts the set for good (Redis never converts
-- back while the set lives, but an RDB load does, hence the check); it is removed in the same call, so
-- no one ever sees it. Small sets (a worker at low concurrency) stay compact.
local SKIPLIST_FROM = 16
local function keepSkiplist(zsetKey)
  if redis.call('ZCARD', zsetKey) >= SKIPLIST_FROM and redis.call('OBJECT', 'ENCODING', zsetKey) == 'listpack' then
    local long = string.rep('~', 256)
    redis.call('ZADD', zsetKey, 0, long)
    redis.call('ZREM', zsetKey, long)
  end
end
