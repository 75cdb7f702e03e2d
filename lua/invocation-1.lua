--[[
  Worker-function invocations of a queue (echomq/lambda): an invocation enters with a lease, renews it
  while it runs and leaves when it returns; one killed or frozen stops counting when its lease ends. The
  reaper reads the count (backlog-5.lua) to start no more worker functions than it may. A queue whose
  workers are not functions never has this key.

  KEYS[1] invocations ZSET <prefix>:{q}:invocations (invocation id -> lease end, ms, Redis clock)

  ARGV[1] 'enter' (enter or renew) or 'leave'
  ARGV[2] the invocation's id
  ARGV[3] lease (ms), for 'enter'

  Returns the number of live invocations, this one included after an 'enter'. The key expires with the
  latest lease, so a queue whose functions all died keeps nothing.
]]
local rcall = redis.call
-- @include now

local key = KEYS[1]
local now = nowMs()
rcall('ZREMRANGEBYSCORE', key, '-inf', now)
if ARGV[1] == 'enter' then
  rcall('ZADD', key, now + tonumber(ARGV[3]), ARGV[2])
else
  rcall('ZREM', key, ARGV[2])
end
local live = rcall('ZCARD', key)
if live == 0 then
  rcall('DEL', key)
  return 0
end
local last = rcall('ZRANGE', key, -1, -1, 'WITHSCORES')[2]
rcall('PEXPIREAT', key, math.floor(tonumber(last)) + 1)
return live
