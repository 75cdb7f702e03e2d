--[[
  Removes the oldest finished jobs of one set past its retention: while the set holds more than its
  count, or its oldest job is older than its age. The limits are the set's, from `meta` (the last
  finished job's, see retention.lua). The caller passes the oldest ids (ZRANGE set 0 n-1); the script
  re-checks each in order and stops at the first one it keeps, so the cost is the jobs removed (the
  set's oldest ids read at once, then one ZREM and one UNLINK). A job is removed only while it is still
  among the set's oldest. A job past the count goes whatever its age, so its score is not read (Redis
  formats each score it replies, a few microseconds apiece); within the count a score is read only for
  the age, one job at a time.

  KEYS[1] set      ZSET  <prefix>:{q}:completed or <prefix>:{q}:failed (id -> finish time, ms)
  KEYS[2] meta     HASH  <prefix>:{q}:meta
  Per job i (i = 1 .. n), two keys, or six when ARGV[2] is "f":
    HASH  job i, LIST its log; with "f" also SET, HASH, HASH, ZSET: a flow's parent's dependencies,
    processed, failed and unsuccessful children (BullMQ's keys, removed with it)

  ARGV[1] the set's name: "completed" or "failed"
  ARGV[2] "f" when each job's four flow keys follow its two; "p" when they do not and the queue has flow
          keys: a parent (its hash's `deps`, set with its first child: addFlow-10.lua, adoptChild-4.lua) is
          then left for a call with "f" and returned; "" when the queue has none
  ARGV[2 + i] job id i, oldest first

  A queue holds flow keys only while a job of it is a parent: meta's `parents` counts the jobs with `deps`
  (addFlow-10.lua, adoptChild-4.lua count them; this script, remove-22.lua, clean-5.lua, drain-8.lua, and
  finish-16.lua and sweep-11.lua for a parent removed as it ends, count them out with their flow keys, and
  drop the field at 0). Without parents a job's two keys are all it
  has, and the caller sends only those. Called with "" on a queue that has them, it removes nothing and
  says so (the caller calls again with "p"), so no parent's keys are left behind; with "p", only its
  parents' keys are sent (a flow's children have none), and once the queue has none it checks no job and
  says so (the caller sends "" again). Meta's `flows` ('1'), written by earlier versions that did not count
  parents, stands for parents never counted out: its queue's trims check every job, for good.

  Returns { how many it removed, done (1 when the set is within its limits, 0 when more may be removed), near (1
  when it is within them or past its count by at most half its slack: where a worker's trim stops, as the
  jobs that finished while it ran are left to the next one, retention.lua trimDue), 1 when the call needs
  "p" (nothing was removed), -1 when it was sent "p" and the queue has no parents, else 0, the parents left
  for a call with "f" ("p": counted as removed) }.
]]
local rcall = redis.call
local setKey, metaKey = KEYS[1], KEYS[2]
local set, withFlows, parentsApart = ARGV[1], ARGV[2] == 'f', ARGV[2] == 'p'
-- @include now
-- @include retention
-- @include parents

local meta = rcall('HMGET', metaKey, KEEP_FIELDS[set].meta, 'parents', 'flows')
local mayHaveParents = meta[3] ~= false or (tonumber(meta[2]) or 0) > 0
if mayHaveParents and not (withFlows or parentsApart) then
  return { 0, 0, 0, 1, {} }
end
-- Sent "p" for a queue whose last parent went: its jobs are removed as "" would, none read.
local noParents = parentsApart and not mayHaveParents
if noParents then
  parentsApart = false
end
local count, age = parseKeep(meta[1])
local now = nowMs()
local size = rcall('ZCARD', setKey)
local function beyond(finishedAt)
  return (count ~= nil and size > count) or (age ~= nil and tonumber(finishedAt) <= now - age)
end

-- Which candidates are still in the set: its oldest n, read at once (a candidate that left, or came back
-- later, is not among them and is skipped); those to go leave in one ZREM and one UNLINK.
local n = #ARGV - 2
local stride = withFlows and 6 or 2
local present = {}
if n > 0 then
  for _, id in ipairs(rcall('ZRANGE', setKey, 0, n - 1)) do
    present[id] = true
  end
end
local removed, keys, parents = {}, {}, {}
-- With "f": the parents removed (their `deps` read again, as a job may have gone and come back since "p").
local counted = 0
local kept = false
for i = 1, n do
  local id = ARGV[2 + i]
  if present[id] then
    local past = count ~= nil and size > count
    if not past and age ~= nil then
      past = beyond(rcall('ZSCORE', setKey, id))
    end
    if not past then
      kept = true
      break
    end
    present[id] = nil
    size = size - 1
    local jobKey = KEYS[3 + stride * (i - 1)]
    if parentsApart and rcall('HEXISTS', jobKey, 'deps') == 1 then
      parents[#parents + 1] = id
    else
      if withFlows and rcall('HEXISTS', jobKey, 'deps') == 1 then
        counted = counted + 1
      end
      removed[#removed + 1] = id
      for k = 3 + stride * (i - 1), 2 + stride * i do
        keys[#keys + 1] = KEYS[k]
      end
    end
  end
end
if #removed > 0 then
  rcall('ZREM', setKey, unpack(removed))
  rcall('UNLINK', unpack(keys))
end
countOutParents(metaKey, counted)
local told = noParents and -1 or 0
if kept then
  return { #removed, 1, 1, told, parents }
end
-- Every candidate went: is the set within its limits now, or near them?
local oldest = rcall('ZRANGE', setKey, 0, 0, 'WITHSCORES')[2]
local done = not (oldest and beyond(oldest))
local near = done or not ((count ~= nil and size > count + math.floor(trimSlack(count) / 2)) or (age ~= nil and tonumber(oldest) <= now - age))
return { #removed, done and 1 or 0, near and 1 or 0, told, parents }
