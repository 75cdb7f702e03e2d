--[[
  Ends the reaper's claim on a queue's count of failed jobs (claim-1.lua): once the invocation published
  them, the claim goes; when its publish failed, the claimed jobs go back to meta's `failedNew`, so the
  next invocation publishes them. Only the claim's own invocation settles it: a claim taken over after its
  lease ended belongs to the invocation that took it.

  KEYS[1] meta  HASH  <prefix>:{q}:meta

  ARGV[1] the claiming invocation's token
  ARGV[2] 1: published (the claim ends); 0: not published (the jobs go back to `failedNew`)

  Returns the jobs the claim held, or -1 when the claim is not this invocation's (none, or taken over).
]]
local rcall = redis.call
local metaKey = KEYS[1]
local token, published = ARGV[1], ARGV[2] == '1'

local f = rcall('HMGET', metaKey, 'failedClaim', 'failedClaimed')
if f[1] ~= token then
  return -1
end
local held = tonumber(f[2]) or 0
rcall('HDEL', metaKey, 'failedClaim', 'failedClaimed', 'failedClaimUntil')
if not published and held > 0 then
  rcall('HINCRBY', metaKey, 'failedNew', held)
end
return held
