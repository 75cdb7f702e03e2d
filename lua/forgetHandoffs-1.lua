--[[
  Deletes delivered entries of a queue's flow outbox (lib/flows/handoffs.ts), each only while it is still the
  entry that was delivered: one rewritten meanwhile (its child ended again, after a retry) stays for its own
  delivery.

  KEYS[1] handoffs  HASH  <prefix>:{q}:handoffs (child id -> entry)

  ARGV[1] .. ARGV[n] the children's ids, then ARGV[n + 1] .. ARGV[2n] the entries delivered, in the same order

  Returns how many were deleted.
]]
local ids = {}
local n = #ARGV / 2
local held = n > 0 and redis.call('HMGET', KEYS[1], unpack(ARGV, 1, n)) or {}
for i = 1, n do
  if held[i] == ARGV[n + i] then
    ids[#ids + 1] = ARGV[i]
  end
end
if #ids > 0 then
  redis.call('HDEL', KEYS[1], unpack(ids))
end
return #ids
