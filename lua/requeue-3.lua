--[[
  Returns reservations past their expiry (a dead worker's, or one that closed without a word) to the
  front of `wait`, oldest first, where they were when reserved. The sweep calls it after the probe
  returned a full share of them, until a call returns fewer than `n`: a crash of a busy fleet may leave
  thousands, and each call stays bounded. Touches no job hash.

  KEYS[1] reserved  ZSET  <prefix>:{q}:reserved (id -> reservation expiry, ms)
  KEYS[2] wait      LIST  <prefix>:{q}:wait
  KEYS[3] marker    ZSET  <prefix>:{q}:marker

  ARGV[1] most reservations to return in this call

  Returns the number returned to `wait`.
]]
local rcall = redis.call
local reservedKey, waitKey, markerKey = KEYS[1], KEYS[2], KEYS[3]
local n = tonumber(ARGV[1])
-- @include now

local expired = rcall('ZRANGEBYSCORE', reservedKey, '-inf', nowMs(), 'LIMIT', 0, n)
for i = #expired, 1, -1 do
  rcall('ZREM', reservedKey, expired[i])
  rcall('RPUSH', waitKey, expired[i])
end
if #expired > 0 then
  rcall('ZADD', markerKey, 0, '0')
end
return #expired
