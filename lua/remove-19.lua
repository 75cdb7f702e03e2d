--[[
  Removes a job that is not in flight: its hash, its log, and its entry in whichever set or list holds it.
  A job in `active` is left alone (its worker owns it). A job id whose job was removed can be added again;
  a deduplication id it held without a ttl is released (releaseDeduplication.lua).
  Flows: a parent's own keys (its dependencies, its children's values and failures) go with it, and a
  parent in `waiting-children` leaves it (the caller removes its children, BullMQ's default); a child that
  had not completed tells its parent it is gone (lua/includes/handoff.lua: the parent stops waiting for it
  and, if it was the last, moves on), unless ARGV[2] is "0" (its parent is being removed too).

  KEYS[1]  job        HASH   <prefix>:{q}:<id>
  KEYS[2]  active     ZSET   <prefix>:{q}:active
  KEYS[3]  wait       LIST   <prefix>:{q}:wait
  KEYS[4]  delayed    ZSET   <prefix>:{q}:delayed
  KEYS[5]  completed  ZSET   <prefix>:{q}:completed
  KEYS[6]  failed     ZSET   <prefix>:{q}:failed
  KEYS[7]  reserved   ZSET   <prefix>:{q}:reserved
  KEYS[8]  meta       HASH   <prefix>:{q}:meta (`parents`: a parent removed is counted out, trim-2.lua)
  KEYS[9]  events     STREAM <prefix>:{q}:events
  KEYS[10] listened   ZSET   <prefix>:{q}:listened
  KEYS[11] logs       LIST   <prefix>:{q}:<id>:logs
  KEYS[12] prioritized     ZSET  <prefix>:{q}:prioritized
  KEYS[13] reservedScores  HASH  <prefix>:{q}:reservedScores
  KEYS[14] waiting-children ZSET <prefix>:{q}:waiting-children
  KEYS[15] handoffs        HASH  <prefix>:{q}:handoffs
  KEYS[16] dependencies    SET   <prefix>:{q}:<id>:dependencies
  KEYS[17] processed       HASH  <prefix>:{q}:<id>:processed
  KEYS[18] failed          HASH  <prefix>:{q}:<id>:failed
  KEYS[19] unsuccessful    ZSET  <prefix>:{q}:<id>:unsuccessful

  ARGV[1] job id
  ARGV[2] "0" not to tell the job's parent (it is being removed), else "1"
  ARGV[3] "1": a parent (a job with any of the four keys of its children) is not removed but answered
          "parent", for the caller to read its children first; "0": removed all the same
  ARGV[4] "1": a completed or failed job is not removed but answered "kept" (BullMQ's removeUnprocessedChildren
          keeps the children that ran); absent or "0": removed all the same

  Returns { "removed", hand-off entry or "" }, { "missing" } (no such job), { "active" } (in flight;
  nothing changed), { "parent" } (see ARGV[3]; nothing changed) or { "kept" } (see ARGV[4]; nothing changed). Emits `removed`
  with `prev`, the state the job was removed from (BullMQ's key names: wait, prioritized, delayed,
  completed, failed).
]]
local rcall = redis.call
local jobKey, activeKey, logsKey = KEYS[1], KEYS[2], KEYS[11]
local waitKey, delayedKey, completedKey, failedKey, reservedKey = KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local q = { meta = KEYS[8], events = KEYS[9], listened = KEYS[10] }
local prioritizedKey, reservedScoresKey = KEYS[12], KEYS[13]
local id = ARGV[1]
-- @include events
-- @include releaseDeduplication
-- @include handoff
-- @include parents

if rcall('ZSCORE', activeKey, id) then
  return { 'active' }
end
local f = rcall('HMGET', jobKey, 'state', 'deid', 'parentKey', 'parent', 'deps')
local state = f[1]
if not state then
  return { 'missing' }
end
if ARGV[4] == '1' and (state == 'completed' or state == 'failed') then
  return { 'kept' }
end
if ARGV[3] == '1' and rcall('EXISTS', KEYS[16], KEYS[17], KEYS[18], KEYS[19]) > 0 then
  return { 'parent' }
end
-- Only the structure the job's state names holds it: one removal, O(log n) except in `wait`, where LREM
-- walks the list (as every Redis list queue's remove does).
if state == 'wait' or state == 'prioritized' then
  -- A waiting job may be reserved by a busy worker for its next call (see takeJobs.lua).
  if rcall('ZREM', reservedKey, id) == 1 then
    rcall('HDEL', reservedScoresKey, id)
  elseif state == 'wait' then
    rcall('LREM', waitKey, 0, id)
  else
    rcall('ZREM', prioritizedKey, id)
  end
elseif state == 'delayed' then
  rcall('ZREM', delayedKey, id)
elseif state == 'waiting-children' then
  rcall('ZREM', KEYS[14], id)
else
  rcall('ZREM', completedKey, id)
  rcall('ZREM', failedKey, id)
end
releaseDeduplication(q.meta, f[2], id)
local entry = ''
if f[3] and state ~= 'completed' and ARGV[2] ~= '0' then
  -- An outcome not yet told (a failure under a policy) is the one the parent must learn: it stays, and goes
  -- back for the caller to deliver, rather than being overwritten by `removed`.
  entry = rcall('HGET', KEYS[15], id) or handOff(KEYS[15], id, f[3], f[4], 'removed', '')
end
rcall('UNLINK', jobKey, logsKey, KEYS[16], KEYS[17], KEYS[18], KEYS[19])
if f[5] then
  countOutParents(q.meta, 1)
end
emit(q, 'removed', 'jobId', id, 'prev', state)
return { 'removed', entry }
