--[[
  Returns reservations past their expiry (a dead worker's, or one that closed without a word) to where
  they were, oldest first: the front of `wait`, or a prioritized one to its place (reservations.lua). The
  sweep calls it after the probe returned a full share of them, until a call returns fewer than `n`: a
  crash of a busy fleet may leave thousands, and each call stays bounded. Touches no job hash.

  KEYS[1] reserved        ZSET  <prefix>:{q}:reserved (id -> reservation expiry, ms)
  KEYS[2] wait            LIST  <prefix>:{q}:wait
  KEYS[3] marker          ZSET  <prefix>:{q}:marker
  KEYS[4] prioritized     ZSET  <prefix>:{q}:prioritized
  KEYS[5] reservedScores  HASH  <prefix>:{q}:reservedScores

  ARGV[1] most reservations to return in this call

  Returns the number returned.
]]
local rcall = redis.call
local q = { reserved = KEYS[1], wait = KEYS[2], marker = KEYS[3], prioritized = KEYS[4], reservedScores = KEYS[5] }
local n = tonumber(ARGV[1])
-- @include now
-- @include reservations

local expired = rcall('ZRANGEBYSCORE', q.reserved, '-inf', nowMs(), 'LIMIT', 0, n)
if #expired > 0 then
  rcall('ZREM', q.reserved, unpack(expired))
end
return putBack(q, expired)
