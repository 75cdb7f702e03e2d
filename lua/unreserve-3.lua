--[[
  Returns ids a worker reserved and will not take (it is closing, or its jobs slowed down) to the front of
  `wait`, where they were. An id whose reservation is gone (taken, or already returned) is left alone.

  KEYS[1] reserved  ZSET  <prefix>:{q}:reserved
  KEYS[2] wait      LIST  <prefix>:{q}:wait
  KEYS[3] marker    ZSET  <prefix>:{q}:marker

  ARGV[1], ARGV[2], ... the ids, next to be served first

  Returns the number returned to `wait`.
]]
local rcall = redis.call
local reservedKey, waitKey, markerKey = KEYS[1], KEYS[2], KEYS[3]

local back = 0
for i = #ARGV, 1, -1 do
  if rcall('ZREM', reservedKey, ARGV[i]) == 1 then
    rcall('RPUSH', waitKey, ARGV[i])
    back = back + 1
  end
end
if back > 0 then
  rcall('ZADD', markerKey, 0, '0')
end
return back
