--[[
  Deletes a queue, a batch at a time: queue.obliterate's step. In "jobs" mode it removes the given jobs
  (ids the caller read from one source) from that source and deletes their hashes, leases and logs; in
  "keys" mode, once every set is empty, it deletes the queue's own keys. Refused while jobs are in flight
  unless forced (their workers' finishes then find nothing and change nothing). Flows: a job's
  dependencies, processed, failed and unsuccessful keys go with it (BullMQ's removeJobKeys), parents in
  `waiting-children` are a source, a removed child tells its parent (as a removed job does), and "keys" mode deletes `waiting-children`, the outbox (`handoffs`, the
  caller delivers it first) and `adding`. A queue without flows passes those keys, and nothing exists there.

  KEYS[1]  wait       LIST   <prefix>:{q}:wait
  KEYS[2]  active     ZSET   <prefix>:{q}:active
  KEYS[3]  stalled    ZSET   <prefix>:{q}:stalled
  KEYS[4]  delayed    ZSET   <prefix>:{q}:delayed
  KEYS[5]  completed  ZSET   <prefix>:{q}:completed
  KEYS[6]  failed     ZSET   <prefix>:{q}:failed
  KEYS[7]  marker     ZSET   <prefix>:{q}:marker
  KEYS[8]  meta       HASH   <prefix>:{q}:meta
  KEYS[9]  reserved   ZSET   <prefix>:{q}:reserved
  KEYS[10] events     STREAM <prefix>:{q}:events
  KEYS[11] listened   ZSET   <prefix>:{q}:listened (not deleted: it holds the live QueueEvents' marks, which
                             must go on hearing the queue's events; it expires by itself)
  KEYS[12] metrics    HASH   <prefix>:{q}:metrics
  KEYS[13] prioritized     ZSET   <prefix>:{q}:prioritized
  KEYS[14] reservedScores  HASH   <prefix>:{q}:reservedScores
  KEYS[15] limiter         ZSET   <prefix>:{q}:limiter
  KEYS[16] waiting-children ZSET  <prefix>:{q}:waiting-children
  KEYS[17] handoffs        HASH   <prefix>:{q}:handoffs
  KEYS[18] adding          ZSET   <prefix>:{q}:adding
  KEYS[12 + 7i]       HASH   job i        (i = 1 .. n)
  KEYS[13 + 7i]       STRING lease of job i
  KEYS[14 + 7i]       LIST   log of job i
  KEYS[15 + 7i] .. KEYS[18 + 7i]  SET, HASH, HASH, ZSET: job i's dependencies, processed, failed and
                      unsuccessful children (a flow's parent's; absent for any other job)

  ARGV[1] "jobs" or "keys"
  ARGV[2] "1" to go on while jobs are in flight, else "0"
  ARGV[3] in "jobs" mode, the source the ids were read from: "wait" (its tail), "reserved", "active",
          "prioritized", "delayed", "completed", "failed" or "waiting-children"
  ARGV[3 + i] job id i

  Returns { status, count[, entries] }: status "active" (jobs in flight or reserved, not forced; nothing changed), "ok"
  with the jobs removed and { child id, entry, ... } the outbox entries of the flow children among them (the
  caller delivers them), or in "keys" mode "done" (the queue's keys are gone) or "more" (a set is not empty).
]]
local rcall = redis.call
local waitKey, activeKey, stalledKey, delayedKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local completedKey, failedKey, reservedKey = KEYS[5], KEYS[6], KEYS[9]
local mode, force, source = ARGV[1], ARGV[2] == '1', ARGV[3]
-- @include handoff

-- Reserved jobs count as in flight: a busy worker holds them to start next (BullMQ's would have taken them).
if not force and rcall('ZCARD', activeKey) + rcall('ZCARD', reservedKey) > 0 then
  return { 'active', 0 }
end
if mode == 'keys' then
  local sizes = rcall('LLEN', waitKey) + rcall('ZCARD', activeKey) + rcall('ZCARD', delayedKey) + rcall('ZCARD', completedKey)
    + rcall('ZCARD', failedKey) + rcall('ZCARD', reservedKey) + rcall('ZCARD', KEYS[13]) + rcall('ZCARD', KEYS[16])
  if sizes > 0 then
    return { 'more', sizes }
  end
  rcall('UNLINK', waitKey, activeKey, stalledKey, delayedKey, completedKey, failedKey, KEYS[7], KEYS[8], reservedKey, KEYS[10], KEYS[12],
    KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17], KEYS[18])
  return { 'done', 0 }
end

local sets = {
  reserved = reservedKey, active = activeKey, delayed = delayedKey, completed = completedKey, failed = failedKey, prioritized = KEYS[13],
  ['waiting-children'] = KEYS[16],
}
local removed, handoffs = 0, {}
for i = 1, #ARGV - 3 do
  local id = ARGV[3 + i]
  local gone
  if source == 'wait' then
    gone = rcall('LREM', waitKey, -1, id)
  else
    gone = rcall('ZREM', sets[source], id)
  end
  if gone > 0 then
    if source == 'active' then
      rcall('ZREM', stalledKey, id)
    end
    if source == 'reserved' then
      rcall('HDEL', KEYS[14], id)
    end
    local k = 12 + 7 * i
    -- A flow child tells its parent it is gone, as a removed one does (BullMQ's obliterate too); a completed
    -- one's outcome was told, or waits in the outbox, which the caller delivers before deleting it.
    local f = rcall('HMGET', KEYS[k], 'state', 'parentKey', 'parent')
    if f[2] and f[1] ~= 'completed' then
      handoffs[#handoffs + 1] = id
      handoffs[#handoffs + 1] = rcall('HGET', KEYS[17], id) or handOff(KEYS[17], id, f[2], f[3], 'removed', '')
    end
    rcall('UNLINK', KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6])
    removed = removed + 1
  end
end
return { 'ok', removed, handoffs }
