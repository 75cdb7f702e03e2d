--[[
  Holds every worker of the queue back from starting jobs for `ms` (queue.rateLimit, BullMQ's name): for
  a processor that learnt from an API that it must back off. Takes and finishes read meta's
  `limitedUntil` (takeJobs.lua admission); a later call moves the end, an earlier end never shortens it.
  The sweep's recoveries go on (they only put jobs back in line).

  KEYS[1] meta  HASH  <prefix>:{q}:meta

  ARGV[1] ms to hold back (0 lifts a hold)

  Returns when the hold ends (ms, Redis's clock).
]]
local rcall = redis.call
local metaKey = KEYS[1]
local ms = tonumber(ARGV[1])
-- @include now

local now = nowMs()
if ms == 0 then
  rcall('HDEL', metaKey, 'limitedUntil')
  return now
end
local until_ = math.max(now + ms, tonumber(rcall('HGET', metaKey, 'limitedUntil')) or 0)
rcall('HSET', metaKey, 'limitedUntil', string.format('%d', until_))
return until_
