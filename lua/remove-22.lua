--[[
  Removes a job that is not in flight: its hash, its log, and its entry in whichever set or list holds it.
  A job in `active` is left alone while its lease lives (its worker owns it); one whose lease lapsed (its
  worker died or stalled, and no sweep has recovered it yet) is removed, as BullMQ removes an active job
  whose lock is gone: its worker, if it comes back, finds the job gone and its finish changes nothing. With
  ARGV[5] "1", a job scheduler's pending run (the one its scheduler points at) is refused, as BullMQ's:
  removeJobScheduler removes it with its schedule. A job id whose job was removed can be added again;
  a deduplication id it held without a ttl is released (releaseDeduplication.lua).
  Flows: a parent's own keys (its dependencies, its children's values and failures) go with it, and a
  parent in `waiting-children` leaves it (the caller removes its children, BullMQ's default); a child that
  had not completed tells its parent it is gone (lua/includes/handoff.lua: the parent stops waiting for it
  and, if it was the last, moves on), unless ARGV[2] is "0" (its parent is being removed too). The removal
  itself is lua/includes/removeJob.lua, which queue.clean of the waiting states shares (cleanWaiting-10.lua).

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
  KEYS[20] lock            STRING <prefix>:{q}:<id>:lock
  KEYS[21] stalled         ZSET  <prefix>:{q}:stalled
  KEYS[22] scheduler       HASH  <prefix>:{q}:schedulers:<sid>, the job scheduler the id names (`last`: the due
                                time of its newest run, the pending one); for an id no scheduler's, not read

  ARGV[1] job id
  ARGV[2] "0" not to tell the job's parent (it is being removed), else "1"
  ARGV[3] "1": a parent (a job with any of the four keys of its children) is not removed but answered
          "parent", for the caller to read its children first; "0": removed all the same
  ARGV[4] "1": a completed or failed job is not removed but answered "kept" (BullMQ's removeUnprocessedChildren
          keeps the children that ran); absent or "0": removed all the same
  ARGV[5] "1": a job scheduler's pending run (its newest, KEYS[22]'s `last`) is not removed but answered
          "scheduler"; "0" (or an id no scheduler's): not read

  Returns { "removed", hand-off entry or "", its deduplication id or "" (a hold with a ttl is the caller's to
  release: its key is named by the id, lib/redis/admin.ts) }, { "missing" } (no such job), { "active" } (in flight;
  nothing changed), { "parent" } (see ARGV[3]; nothing changed), { "kept" } (see ARGV[4]; nothing changed)
  or { "scheduler" } (see ARGV[5]; nothing changed). Emits `removed`
  with `prev`, the state the job was removed from (BullMQ's key names: wait, prioritized, delayed,
  completed, failed).
]]
local rcall = redis.call
local q = {
  wait = KEYS[3], delayed = KEYS[4], completed = KEYS[5], failed = KEYS[6], reserved = KEYS[7], meta = KEYS[8], events = KEYS[9],
  listened = KEYS[10], prioritized = KEYS[12], reservedScores = KEYS[13], waitingChildren = KEYS[14], handoffs = KEYS[15],
}
local id = ARGV[1]
-- @include events
-- @include releaseDeduplication
-- @include handoff
-- @include parents
-- @include removeJob
-- @include lastDue

if rcall('ZSCORE', KEYS[2], id) and rcall('EXISTS', KEYS[20]) == 1 then
  return { 'active' }
end
local f = rcall('HMGET', KEYS[1], 'state', 'deid', 'parentKey', 'parent', 'deps')
local state = f[1]
if not state then
  return { 'missing' }
end
if ARGV[5] == '1' and lastDue(KEYS[22]) == string.match(id, ':(%d+)$') then
  return { 'scheduler' }
end
if ARGV[4] == '1' and (state == 'completed' or state == 'failed') then
  return { 'kept' }
end
if ARGV[3] == '1' and rcall('EXISTS', KEYS[16], KEYS[17], KEYS[18], KEYS[19]) > 0 then
  return { 'parent' }
end
if state == 'active' then
  rcall('ZREM', KEYS[2], id)
  rcall('ZREM', KEYS[21], id)
else
  leaveLine(q, id, state)
end
local entry = dropJob(q, id, { KEYS[1], KEYS[11], KEYS[16], KEYS[17], KEYS[18], KEYS[19] }, f, ARGV[2] ~= '0')
return { 'removed', entry, f[2] or '' }
