--[[
  Worker-function invocations of a queue (echomq/lambda): an invocation enters with a lease, renews it
  while it runs and leaves when it returns; one killed or frozen stops counting when its lease ends. The
  reaper reads the count (probe-13.lua, or backlog-5.lua for a queue it did not sweep) to start no more
  worker functions than it may, and enters every invocation it starts in one call. A queue whose workers
  are not functions never has this key.

  KEYS[1] invocations ZSET <prefix>:{q}:invocations (invocation id -> lease end, ms, Redis clock)

  ARGV[1] 'enter' (enter or renew) or 'leave'
  ARGV[2] lease (ms), for 'enter'
  ARGV[3..] the invocations' ids (at least one; the reaper passes those it starts in one pass, at most
            maxConcurrency, 1000)

  Returns the number of live invocations, these included after an 'enter'. The key expires with the
  latest lease, so a queue whose functions all died keeps nothing.
]]
local rcall = redis.call
-- @include now

local key = KEYS[1]
local now = nowMs()
rcall('ZREMRANGEBYSCORE', key, '-inf', now)
if ARGV[1] == 'enter' then
  local leaseEnd = now + tonumber(ARGV[2])
  local members = {}
  for i = 3, #ARGV do
    members[#members + 1] = leaseEnd
    members[#members + 1] = ARGV[i]
  end
  rcall('ZADD', key, unpack(members))
else
  rcall('ZREM', key, unpack(ARGV, 3))
end
local live = rcall('ZCARD', key)
if live == 0 then
  rcall('DEL', key)
  return 0
end
local last = rcall('ZRANGE', key, -1, -1, 'WITHSCORES')[2]
rcall('PEXPIREAT', key, math.floor(tonumber(last)) + 1)
return live
