-- Keeps a sorted set that is updated many members at a time (the lease index, the reservations, the
-- finished) in Redis's skiplist encoding. Below zset-max-listpack-entries (128) Redis stores it as a
-- listpack, where every update scans and moves the whole list: a ZADD of 50 leases into a listpack cost
-- twice what it costs into a skiplist, and each member removed scans the list again. A member longer
-- than zset-max-listpack-value converts the set for good (Redis never converts back while the set lives,
-- but an RDB load does, hence keepSkiplist's check); it is removed in the same call, so no one ever sees
-- it. Small sets (a worker at low concurrency) stay compact.
local SKIPLIST_FROM = 16
-- Made when first needed: a script's top level runs on every call, and string.rep costs as much as a command.
local skiplistMember
local function longMember()
  skiplistMember = skiplistMember or string.rep('~', 256)
  return skiplistMember
end
local function keepSkiplist(zsetKey)
  if rcall('ZCARD', zsetKey) >= SKIPLIST_FROM and rcall('OBJECT', 'ENCODING', zsetKey) == 'listpack' then
    rcall('ZADD', zsetKey, 0, longMember())
    rcall('ZREM', zsetKey, longMember())
  end
end

-- ZADD of `scored` (score, member, ...). A batch of SKIPLIST_FROM members or more goes in behind the long
-- member: Redis creates a set whose first member is long as a skiplist, and converts a listpack one before
-- the batch rather than scanning it per member (most sets such batches fill were emptied since their last:
-- `active` and `reserved` drain between a worker's calls). Returns ZADD's reply.
local function zaddMany(zsetKey, scored)
  if #scored < 2 * SKIPLIST_FROM then
    return rcall('ZADD', zsetKey, unpack(scored))
  end
  local added = rcall('ZADD', zsetKey, 0, longMember(), unpack(scored))
  rcall('ZREM', zsetKey, longMember())
  return added - 1
end
