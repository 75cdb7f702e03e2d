--[[
  Makes room for a new child of an existing job (Queue.add with BullMQ's `parent` option, or a flow added
  under one): its key joins the parent's `dependencies` before the child is written in its own queue
  (addFlow-9.lua), so the child can never end before its parent counts it. A parent that does not exist
  is refused (BullMQ's -5, "Missing key for parent job") and nothing is written.

  KEYS[1] job           HASH <prefix>:{q}:<id>, the parent
  KEYS[2] dependencies  SET  <prefix>:{q}:<id>:dependencies

  ARGV[1] .. ARGV[n] the children's job keys

  Returns 1, or 0 when there is no such parent.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('SADD', KEYS[2], unpack(ARGV))
return 1
