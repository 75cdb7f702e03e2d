--[[
  Makes room for a new child of an existing job (Queue.add with BullMQ's `parent` option, or a flow added
  under one): its key joins the parent's `dependencies` before the child is written in its own queue
  (addFlow-10.lua), so the child can never end before its parent counts it. Until the producer says the
  child is written, the parent is in `adding` (lib/flows/adding.ts: a producer that died between the two
  steps is found by the parent queue's sweep). A parent that does not exist is refused (BullMQ's -5,
  "Missing key for parent job") and nothing is written.

  KEYS[1] job           HASH <prefix>:{q}:<id>, the parent (`deps`: it has flow keys, trim-2.lua removes them)
  KEYS[2] dependencies  SET  <prefix>:{q}:<id>:dependencies
  KEYS[3] adding        ZSET <prefix>:{q}:adding
  KEYS[4] meta          HASH <prefix>:{q}:meta (`parents`: how many of its jobs hold flow keys, trim-2.lua;
                             `adopted` once a job that may be running became a parent: finish-16.lua)

  ARGV[1] the parent's id
  ARGV[2] .. ARGV[n] the children's job keys

  Returns 1, or 0 when there is no such parent.
]]
-- @include now
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local metaKey = KEYS[4]
redis.call('SADD', KEYS[2], unpack(ARGV, 2))
-- A parent is counted once, when it first gets children (it may be adopted into again).
if redis.call('HSET', KEYS[1], 'deps', '1') == 1 then
  redis.call('HINCRBY', metaKey, 'parents', 1)
  -- Running, or in a worker's hand (a waiting job may be: its fields are read before it starts), it was
  -- taken as no parent, and its finish would not send its flow keys. meta's `adopted` makes every finish
  -- of the queue read `deps`, so a finish that would remove it at once asks for them (finish-16.lua "p").
  local state = redis.call('HGET', KEYS[1], 'state')
  if state == 'active' or state == 'wait' or state == 'prioritized' then
    redis.call('HSET', metaKey, 'adopted', '1')
  end
end
redis.call('ZADD', KEYS[3], nowMs(), ARGV[1])
return 1
