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
  KEYS[6i - 3]     HASH  job i       (i = 1 .. n)
  KEYS[6i - 2]     LIST  log of job i
  KEYS[6i - 1], KEYS[6i], KEYS[6i + 1], KEYS[6i + 2]  SET, HASH, HASH, ZSET: a flow's parent's dependencies,
                   processed, failed and unsuccessful children (BullMQ's keys, removed with it)

  ARGV[1] the set's name: "completed" or "failed"
  ARGV[1 + i] job id i, oldest first

  Returns { jobs removed (a count: no caller needs their ids, which cost the reply a few bytes a job), done
  (1 when the set is within its limits, 0 when more may be removed), near (1
  when it is within them or past its count by at most half its slack: where a worker's trim stops, as the
  jobs that finished while it ran are left to the next one, retention.lua trimDue) }.
]]
local rcall = redis.call
local setKey, metaKey = KEYS[1], KEYS[2]
local set = ARGV[1]
-- @include now
-- @include retention

local count, age = parseKeep(rcall('HGET', metaKey, KEEP_FIELDS[set].meta))
local now = nowMs()
local size = rcall('ZCARD', setKey)
local function beyond(finishedAt)
  return (count ~= nil and size > count) or (age ~= nil and tonumber(finishedAt) <= now - age)
end

-- Which candidates are still in the set: its oldest n, read at once (a candidate that left, or came back
-- later, is not among them and is skipped); those to go leave in one ZREM and one UNLINK.
local n = #ARGV - 1
local present = {}
if n > 0 then
  for _, id in ipairs(rcall('ZRANGE', setKey, 0, n - 1)) do
    present[id] = true
  end
end
local removed, keys = {}, {}
local kept = false
for i = 1, n do
  local id = ARGV[1 + i]
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
    removed[#removed + 1] = id
    for k = -3, 2 do
      keys[#keys + 1] = KEYS[6 * i + k]
    end
  end
end
if #removed > 0 then
  rcall('ZREM', setKey, unpack(removed))
  rcall('UNLINK', unpack(keys))
end
if kept then
  return { #removed, 1, 1 }
end
-- Every candidate went: is the set within its limits now, or near them?
local oldest = rcall('ZRANGE', setKey, 0, 0, 'WITHSCORES')[2]
local done = not (oldest and beyond(oldest))
local near = done or not ((count ~= nil and size > count + math.floor(trimSlack(count) / 2)) or (age ~= nil and tonumber(oldest) <= now - age))
return { #removed, done and 1 or 0, near and 1 or 0 }
