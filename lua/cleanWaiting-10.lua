--[[
  One step of queue.clean for a waiting state (BullMQ's 'wait', 'prioritized', 'delayed'): of the candidate
  ids the caller passes (the `next` of the step before; none on the first step), removes those whose
  timestamp is the grace period's bound or earlier, as queue.remove removes them (lua/includes/removeJob.lua: log,
  deduplication id, flow keys, parent told, `removed`). A job is compared by BullMQ's timestamps: for
  `wait` the first present of finishedOn, startedOn (BullMQ's processedOn) and createdOn (BullMQ's
  timestamp); for `delayed` startedOn, then createdOn; for `prioritized` createdOn. A scheduler's pending
  run (its newest, the scheduler's `last`) stays, as in BullMQ (and as remove and drain keep it): its
  schedule goes on.

  The source is read oldest first (the tail of `wait`, the head of a sorted set), and a job within the grace
  period is passed over, not a stop: no order of these structures is an order of those timestamps (a promoted
  delayed job joins `wait` behind younger ones). The jobs passed over stay at the source's start (the
  `frontier`, how many; the `anchor`, the newest of them), where each step finds them again: at the anchor's
  place (ZRANK; in `wait`, LINDEX, or LPOS within the frontier when the list moved), so jobs workers took
  meanwhile shift nothing (a job pushed at the tail, before the anchor, is not looked at: it joined after the
  clean began). The candidates are checked where they are now: a step processes the entries after the
  frontier while they are candidates, and stops at the first that is not (the line moved since its read);
  what it reads for the next step is read after it. Jobs cleaned from `wait` are marked in
  place (LSET) and go in one LREM from the tail, whose walk is the frontier's length: the caller bounds it.

  KEYS[1]  wait            LIST   <prefix>:{q}:wait
  KEYS[2]  reserved        ZSET   <prefix>:{q}:reserved (waiting jobs a busy worker set aside)
  KEYS[3]  reservedScores  HASH   <prefix>:{q}:reservedScores
  KEYS[4]  prioritized     ZSET   <prefix>:{q}:prioritized
  KEYS[5]  delayed         ZSET   <prefix>:{q}:delayed
  KEYS[6]  meta            HASH   <prefix>:{q}:meta (deduplication ids; `parents`, trim-2.lua)
  KEYS[7]  events          STREAM <prefix>:{q}:events
  KEYS[8]  listened        ZSET   <prefix>:{q}:listened
  KEYS[9]  handoffs        HASH   <prefix>:{q}:handoffs (child id -> what its parent must learn)
  KEYS[10] schedulers      ZSET   <prefix>:{q}:schedulers (scheduler id -> its next period, ms: a scheduler
                                  stored before `last` existed had its next run made, iteration.lua)
  KEYS[7i + 4]             HASH   candidate i's job (i = 1 .. n)
  KEYS[7i + 5]             LIST   its log
  KEYS[7i + 6] .. KEYS[7i + 9]  SET, HASH, HASH, ZSET: its dependencies, processed, failed and
                           unsuccessful children (a flow's parent's; absent for any other job)
  KEYS[7i + 10]            HASH   the job scheduler its id names, <prefix>:{q}:schedulers:<sid> (`last`); for
                           an id no scheduler's run, not read

  ARGV[1] the source: "wait", "reserved", "prioritized" or "delayed"
  ARGV[2] the state a job must be in to be cleaned: "wait", "prioritized" or "delayed" (a reservation
          holds either of the first two)
  ARGV[3] the bound (ms, Redis's clock): a job whose timestamp is later is within the grace period
  ARGV[4] most jobs to remove in this step
  ARGV[5] how many ids to read for the next step
  ARGV[6] most jobs to pass over: no id past them is read (`wait`'s bound on the LREM's walk)
  ARGV[7] the frontier the step before answered (0 on the first step)
  ARGV[8] its anchor ('' for none)
  ARGV[8 + i] candidate i's id

  Returns { removed ids, { child id, entry, ... } the outbox entries to deliver (lib/flows/handoffs.ts), the
  next step's candidates (none: the source's end), the frontier, the anchor, { id, deduplication id, ... } of
  the jobs removed that had one (a hold with a ttl is the caller's to release, lib/redis/admin.ts) }. Emits `removed` for each job
  removed and `cleaned` with their count.
]]
local rcall = redis.call
local q = {
  wait = KEYS[1], reserved = KEYS[2], reservedScores = KEYS[3], prioritized = KEYS[4], delayed = KEYS[5], meta = KEYS[6],
  events = KEYS[7], listened = KEYS[8], handoffs = KEYS[9],
}
local schedulersKey = KEYS[10]
local source, want, bound = ARGV[1], ARGV[2], tonumber(ARGV[3])
local room, batch, most = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local frontier, anchor = tonumber(ARGV[7]), ARGV[8]
local sourceKey = (source == 'wait' and q.wait) or (source == 'reserved' and q.reserved) or (source == 'prioritized' and q.prioritized)
  or q.delayed
local inList = source == 'wait'
-- @include events
-- @include releaseDeduplication
-- @include handoff
-- @include parents
-- @include removeJob
-- @include lastDue

-- What a cleaned job of `wait` is marked with until the step's LREM: no job id is empty (lib/options.ts).
local MARK = ''
-- The fields read per candidate: removeJob's five, then the timestamps, then the scheduler it belongs to.
local FIELDS = { 'state', 'deid', 'parentKey', 'parent', 'deps', 'finishedOn', 'startedOn', 'createdOn', 'repeatJobKey' }
-- Where each state's timestamp is read, the first present of these (BullMQ's cleanJobsInSet).
local STAMPED = { wait = { 6, 7, 8 }, delayed = { 7, 8 }, prioritized = { 8 } }

-- `n` ids of the source after its first `from`, oldest first.
local function readAfter(from, n)
  if n <= 0 then
    return {}
  end
  if not inList then
    return rcall('ZRANGE', sourceKey, from, from + n - 1)
  end
  local head = rcall('LRANGE', q.wait, -(from + n), -(from + 1))
  local ids = {}
  for i = #head, 1, -1 do
    ids[#ids + 1] = head[i]
  end
  return ids
end

-- The frontier now: where the anchor is (0 without one, or when it is gone: the jobs passed over are then
-- looked at again).
local function locate()
  if anchor == '' then
    return 0
  end
  if not inList then
    local rank = rcall('ZRANK', sourceKey, anchor)
    return rank and rank + 1 or 0
  end
  if frontier > 0 and rcall('LINDEX', q.wait, -frontier) == anchor then
    return frontier
  end
  local at = rcall('LPOS', q.wait, anchor, 'RANK', -1, 'MAXLEN', frontier + 2 * batch)
  return at and rcall('LLEN', q.wait) - at or 0
end

-- Whether a job's fields say it stays: within the grace period, or a scheduler's pending run (`scheduler`
-- the hash of the scheduler its id names).
local function stays(id, f, scheduler)
  for _, at in ipairs(STAMPED[want]) do
    if f[at] then
      if tonumber(f[at]) > bound then
        return true
      end
      break
    end
  end
  if f[9] then
    return id == 'repeat:' .. f[9] .. ':' .. lastDue(scheduler, rcall('ZSCORE', schedulersKey, f[9]))
  end
  return false
end

frontier = locate()
if frontier == 0 then
  anchor = ''
end
local slot = {}
for i = 9, #ARGV do
  slot[ARGV[i]] = 7 * (i - 8) + 4
end
local removed, handoffs, held = {}, {}, {}
local passed = 0
for _, id in ipairs(readAfter(frontier, #ARGV - 8)) do
  local k = slot[id]
  if not k or #removed >= room then
    break
  end
  local f = rcall('HMGET', KEYS[k], unpack(FIELDS))
  if f[1] ~= want or stays(id, f, KEYS[k + 6]) then
    -- Not a job of this state (a reservation of the other, or a job not as read) or one that stays: passed over.
    passed = passed + 1
    anchor = id
  else
    if inList then
      rcall('LSET', q.wait, -(frontier + passed + #removed + 1), MARK)
    else
      leaveLine(q, id, want)
    end
    local entry = dropJob(q, id, { KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5] }, f, true)
    if entry ~= '' then
      handoffs[#handoffs + 1] = id
      handoffs[#handoffs + 1] = entry
    end
    removed[#removed + 1] = id
    if f[2] then
      held[#held + 1] = id
      held[#held + 1] = f[2]
    end
  end
end
if #removed > 0 then
  if inList then
    rcall('LREM', q.wait, -#removed, MARK)
  end
  emit(q, 'cleaned', 'count', #removed)
end
frontier = frontier + passed
return { removed, handoffs, readAfter(frontier, math.min(batch, most - frontier)), frontier, anchor, held }
