--[[
  Returns ids a worker reserved and will not take (it is closing, or its jobs slowed down) to where they
  were: the front of `wait`, or a prioritized one to its place (reservations.lua). An id whose
  reservation is gone (taken, or already returned) is left alone.

  KEYS[1] reserved        ZSET  <prefix>:{q}:reserved
  KEYS[2] wait            LIST  <prefix>:{q}:wait
  KEYS[3] marker          ZSET  <prefix>:{q}:marker
  KEYS[4] prioritized     ZSET  <prefix>:{q}:prioritized
  KEYS[5] reservedScores  HASH  <prefix>:{q}:reservedScores

  ARGV[1], ARGV[2], ... the ids, next to be served first

  Returns the number returned.
]]
local rcall = redis.call
local q = { reserved = KEYS[1], wait = KEYS[2], marker = KEYS[3], prioritized = KEYS[4], reservedScores = KEYS[5] }
-- @include reservations

local ids = {}
for i = 1, #ARGV do
  if rcall('ZREM', q.reserved, ARGV[i]) == 1 then
    ids[#ids + 1] = ARGV[i]
  end
end
return putBack(q, ids)
