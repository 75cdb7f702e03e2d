--[[
  Moves a job in flight to `waiting-children` while it has children not yet settled (BullMQ's
  job.moveToWaitingChildren(token, { child? }), then WaitingChildrenError): it runs again once the last one
  settles (settleChild-9.lua moves it on). Fenced by the run's token as moveToDelayed-9.lua is; no attempt
  is used. The check and the move are one step in the parent's slot, where its children settle too, so a
  child that settles meanwhile either comes before (nothing pending: not moved) or after (it moves the
  parent on).

  KEYS[1] job              HASH   <prefix>:{q}:<id>
  KEYS[2] lease            STRING <prefix>:{q}:<id>:lock
  KEYS[3] active           ZSET   <prefix>:{q}:active
  KEYS[4] stalled          ZSET   <prefix>:{q}:stalled
  KEYS[5] waiting-children ZSET   <prefix>:{q}:waiting-children
  KEYS[6] dependencies     SET    <prefix>:{q}:<id>:dependencies
  KEYS[7] unsuccessful     ZSET   <prefix>:{q}:<id>:unsuccessful
  KEYS[8] meta             HASH   <prefix>:{q}:meta
  KEYS[9] events           STREAM <prefix>:{q}:events
  KEYS[10] listened        ZSET   <prefix>:{q}:listened

  ARGV[1] job id
  ARGV[2] the run's token, or "" (any run of the job in flight)
  ARGV[3] a child's key: wait only while that one is pending ("" for any child)

  Returns { "ok" } (moved), { "none" } (nothing pending: not moved), { "failed-children" } (a child
  failed it, BullMQ's -9), { "missing" }, { "lost" }, { "not-active", state }; nothing changes but for "ok".
  Emits `waiting-children` (prev `active`).
]]
local rcall = redis.call
local jobKey, lockKey, activeKey, stalledKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local waitingChildrenKey, depsKey, unsuccessfulKey = KEYS[5], KEYS[6], KEYS[7]
local q = { meta = KEYS[8], events = KEYS[9], listened = KEYS[10] }
local id, token, child = ARGV[1], ARGV[2], ARGV[3]
-- @include now
-- @include events
-- @include owner
-- @include leaveActive

local status = checkOwner(jobKey, lockKey, token)
if status ~= 'ok' then
  return { status }
end
local held = rcall('HGET', jobKey, 'token')
if not rcall('ZSCORE', activeKey, id) or not held or string.find('=~', string.sub(held, 1, 1), 1, true) then
  return { 'not-active', rcall('HGET', jobKey, 'state') or 'missing' }
end
if rcall('ZCARD', unsuccessfulKey) > 0 then
  return { 'failed-children' }
end
local pending = (child ~= '' and rcall('SISMEMBER', depsKey, child) == 1) or (child == '' and rcall('SCARD', depsKey) > 0)
if not pending then
  return { 'none' }
end
leaveActive(lockKey, activeKey, stalledKey, id)
rcall('HSET', jobKey, 'token', '~' .. held, 'state', 'waiting-children')
rcall('ZADD', waitingChildrenKey, nowMs(), id)
emit(q, 'waiting-children', 'jobId', id, 'prev', 'active')
return { 'ok' }
