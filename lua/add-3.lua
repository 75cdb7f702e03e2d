--[[
  Adds a job, or returns the existing one when its id is taken (nothing is changed then).

  KEYS[1] job      HASH  <prefix>:{q}:<id>
  KEYS[2] wait     LIST  <prefix>:{q}:wait
  KEYS[3] marker   ZSET  <prefix>:{q}:marker

  ARGV[1] job id
  ARGV[2] job name
  ARGV[3] data (JSON text)
  ARGV[4] attempts (total starts allowed)

  Returns 1 when added, 0 when a job with that id already existed.
]]
local rcall = redis.call
local jobKey, waitKey, markerKey = KEYS[1], KEYS[2], KEYS[3]
local id, name, data, attempts = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
-- @include now

if rcall('EXISTS', jobKey) == 1 then
  return 0
end
rcall('HSET', jobKey, 'name', name, 'data', data, 'attempts', attempts, 'attemptsMade', 0,
  'attemptsStarted', 0, 'state', 'wait', 'createdOn', nowMs())
rcall('LPUSH', waitKey, id)
-- Wakes one idle worker; a single member, so a burst of adds costs no memory.
rcall('ZADD', markerKey, 0, '0')
return 1
