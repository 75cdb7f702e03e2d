--[[
  The reaper's claim on a queue's count of failed jobs before it publishes them as JobsFailed. The count
  is meta's `failedNew` (useAttempt.lua adds 1 for every job that enters `failed`). One claim per queue
  at a time, held in meta by the invocation that made it:
    failedClaim       its token (unique per invocation)
    failedClaimed     the jobs it claimed
    failedClaimUntil  when its lease ends (ms, Redis's clock): set past the time its claimer can live
  The count moves into the claim, so an overlapping invocation finds nothing left to claim and publishes
  none of them. While another invocation's claim is live nothing is claimed: the count waits for the
  next invocation. A claim whose lease has ended (its invocation died or timed out before settling it) is
  taken over whole, with the jobs that failed since. settle-1.lua ends a claim.

  KEYS[1] meta  HASH  <prefix>:{q}:meta

  ARGV[1] the claiming invocation's token
  ARGV[2] the claim's lease (ms)

  Returns { jobs claimed (0 while another invocation's claim is live), of which taken over from an
  expired claim }.
]]
local rcall = redis.call
local metaKey = KEYS[1]
local token, leaseMs = ARGV[1], tonumber(ARGV[2])
-- @include now

local now = nowMs()
local f = rcall('HMGET', metaKey, 'failedNew', 'failedClaim', 'failedClaimed', 'failedClaimUntil')
-- A count below zero (acknowledged twice by a reaper before claims) is left for the next failures to fill.
local fresh = math.max(tonumber(f[1]) or 0, 0)
local holder, held, untilMs = f[2], tonumber(f[3]) or 0, tonumber(f[4]) or 0
if holder and holder ~= token and untilMs > now then
  return { 0, 0 }
end
-- A claim here now is either expired (its claimer died: taken over) or this invocation's own (a call
-- resent after a lost reply).
local carried = holder and held or 0
local takenOver = (holder and holder ~= token) and held or 0
if fresh > 0 then
  rcall('HDEL', metaKey, 'failedNew')
end
local claimed = carried + fresh
if claimed == 0 then
  if holder then
    rcall('HDEL', metaKey, 'failedClaim', 'failedClaimed', 'failedClaimUntil')
  end
  return { 0, 0 }
end
rcall('HSET', metaKey, 'failedClaim', token, 'failedClaimed', claimed, 'failedClaimUntil', string.format('%d', now + leaseMs))
return { claimed, takenOver }
