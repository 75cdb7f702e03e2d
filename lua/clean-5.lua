--[[
  Removes finished jobs (of `completed` or `failed`) that finished at least `grace` ms ago, oldest first,
  with their logs: queue.clean's step. The caller passes the oldest ids of the set; the script re-checks
  each and stops at the first one within the grace period, so the cost is the jobs removed. A failed flow
  child tells its parent it is gone, as a removed one does (BullMQ's clean too): one with no failure policy
  was still among the parent's dependencies, and the last lets the parent move on.

  KEYS[1] set       ZSET   <prefix>:{q}:completed or <prefix>:{q}:failed (id -> finish time, ms)
  KEYS[2] meta      HASH   <prefix>:{q}:meta (`parents`: the parents removed are counted out, trim-2.lua)
  KEYS[3] events    STREAM <prefix>:{q}:events
  KEYS[4] listened  ZSET   <prefix>:{q}:listened
  KEYS[5] handoffs  HASH   <prefix>:{q}:handoffs (child id -> what its parent must learn)
  KEYS[6i]          HASH   job i        (i = 1 .. n)
  KEYS[6i + 1]      LIST   log of job i
  KEYS[6i + 2] .. KEYS[6i + 5]  SET, HASH, HASH, ZSET: job i's dependencies, processed, failed and
                    unsuccessful children (a flow's parent's, removed with it; absent for any other job)

  ARGV[1] grace (ms)
  ARGV[1 + i] job id i, oldest first

  Returns { removed ids, done (1 when a job within the grace period was reached, or the set is empty),
  { child id, entry, ... } the outbox entries to deliver (lib/flows/handoffs.ts) }.
  Emits `cleaned` with the count when any was removed.
]]
local rcall = redis.call
local setKey, handoffsKey = KEYS[1], KEYS[5]
local q = { meta = KEYS[2], events = KEYS[3], listened = KEYS[4] }
local grace = tonumber(ARGV[1])
-- @include now
-- @include events
-- @include handoff
-- @include parents

local bound = nowMs() - grace
local removed, done, handoffs = {}, 0, {}
local parents = 0
for i = 1, #ARGV - 1 do
  local id = ARGV[1 + i]
  local finishedAt = rcall('ZSCORE', setKey, id)
  if finishedAt then
    if tonumber(finishedAt) > bound then
      done = 1
      break
    end
    rcall('ZREM', setKey, id)
    local k = 6 * i
    -- A completed child's outcome was told (or waits in the outbox, and stays there to be).
    local f = rcall('HMGET', KEYS[k], 'state', 'parentKey', 'parent', 'deps')
    if f[4] then
      parents = parents + 1
    end
    if f[1] == 'failed' and f[2] then
      handoffs[#handoffs + 1] = id
      handoffs[#handoffs + 1] = rcall('HGET', handoffsKey, id) or handOff(handoffsKey, id, f[2], f[3], 'removed', '')
    end
    rcall('UNLINK', KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5])
    removed[#removed + 1] = id
  end
end
countOutParents(q.meta, parents)
if done == 0 and rcall('ZCARD', setKey) == 0 then
  done = 1
end
if #removed > 0 then
  emit(q, 'cleaned', 'count', #removed)
end
return { removed, done, handoffs }
