--[[
  Removes waiting jobs (those in `wait` and `prioritized`, and those busy workers reserved), or delayed
  ones, with their logs: queue.drain's step. The caller passes ids it read from one source (the tail of
  `wait`, `reserved`, or the head of `prioritized` or `delayed`); each is removed only if it is still
  there, so a job a worker took meanwhile is left to it. Emits nothing, as BullMQ's drain. A flow's child
  tells its parent it is gone, as a removed one does (lua/includes/handoff.lua: an outcome already in the
  outbox is handed on instead), so the parent stops waiting for it; BullMQ's drain does too. A deduplication
  id a drained job held without a ttl is released, as a removed job's is. A job scheduler's pending run is
  not passed (lib/queue/cleanup.ts drainQueue keeps it, as BullMQ's drain does).

  KEYS[1] wait      LIST  <prefix>:{q}:wait
  KEYS[2] reserved  ZSET  <prefix>:{q}:reserved
  KEYS[3] delayed   ZSET  <prefix>:{q}:delayed
  KEYS[4] marker    ZSET  <prefix>:{q}:marker
  KEYS[5] prioritized     ZSET  <prefix>:{q}:prioritized
  KEYS[6] reservedScores  HASH  <prefix>:{q}:reservedScores
  KEYS[7] handoffs        HASH  <prefix>:{q}:handoffs (child id -> what its parent must learn)
  KEYS[8] meta            HASH  <prefix>:{q}:meta (`parents`: the parents removed are counted out, trim-2.lua;
                                deduplication ids held, `de:<did>`)
  KEYS[6i + 3]      HASH  job i        (i = 1 .. n)
  KEYS[6i + 4]      LIST  log of job i
  KEYS[6i + 5] .. KEYS[6i + 8]  SET, HASH, HASH, ZSET: job i's dependencies, processed, failed and
                    unsuccessful children (a flow's parent that moved on; absent for any other job)

  ARGV[1] the source: "wait", "reserved", "prioritized" or "delayed"
  ARGV[1 + i] job id i (for "wait": read from its tail, where LREM from the tail finds it at once)

  Returns { the ids removed, { child id, entry, ... } the outbox entries to deliver (lib/flows/handoffs.ts),
  { id, deduplication id, ... } of the jobs removed that had one (a hold with a ttl is the caller's to
  release: its key is named by the id, lib/redis/admin.ts) }.
]]
local rcall = redis.call
local waitKey, reservedKey, delayedKey, markerKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prioritizedKey, reservedScoresKey, handoffsKey, metaKey = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local source = ARGV[1]
-- @include handoff
-- @include parents
-- @include releaseDeduplication

local handoffs, held = {}, {}

local removed = {}
local parents = 0
for i = 1, #ARGV - 1 do
  local id = ARGV[1 + i]
  local gone = 0
  if source == 'wait' then
    gone = rcall('LREM', waitKey, -1, id)
  elseif source == 'reserved' then
    gone = rcall('ZREM', reservedKey, id)
    rcall('HDEL', reservedScoresKey, id)
  elseif source == 'prioritized' then
    gone = rcall('ZREM', prioritizedKey, id)
  else
    gone = rcall('ZREM', delayedKey, id)
  end
  if gone > 0 then
    local k = 6 * i + 3
    local f = rcall('HMGET', KEYS[k], 'parentKey', 'parent', 'deps', 'deid')
    releaseDeduplication(metaKey, f[4], id)
    if f[4] then
      held[#held + 1] = id
      held[#held + 1] = f[4]
    end
    if f[3] then
      parents = parents + 1
    end
    if f[1] then
      handoffs[#handoffs + 1] = id
      handoffs[#handoffs + 1] = rcall('HGET', handoffsKey, id) or handOff(handoffsKey, id, f[1], f[2], 'removed', '')
    end
    rcall('UNLINK', KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5])
    removed[#removed + 1] = id
  end
end
countOutParents(metaKey, parents)
if source == 'delayed' and rcall('ZCARD', delayedKey) == 0 then
  rcall('ZREM', markerKey, 'd')
end
return { removed, handoffs, held }
