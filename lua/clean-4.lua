--[[
  Removes finished jobs (of `completed` or `failed`) that finished at least `grace` ms ago, oldest first,
  with their logs: queue.clean's step. The caller passes the oldest ids of the set; the script re-checks
  each and stops at the first one within the grace period, so the cost is the jobs removed.

  KEYS[1] set       ZSET   <prefix>:{q}:completed or <prefix>:{q}:failed (id -> finish time, ms)
  KEYS[2] meta      HASH   <prefix>:{q}:meta
  KEYS[3] events    STREAM <prefix>:{q}:events
  KEYS[4] listened  ZSET   <prefix>:{q}:listened
  KEYS[6i - 1]      HASH   job i        (i = 1 .. n)
  KEYS[6i]          LIST   log of job i
  KEYS[6i + 1] .. KEYS[6i + 4]  SET, HASH, HASH, ZSET: job i's dependencies, processed, failed and
                    unsuccessful children (a flow's parent's, removed with it; absent for any other job)

  ARGV[1] grace (ms)
  ARGV[1 + i] job id i, oldest first

  Returns { removed ids, done (1 when a job within the grace period was reached, or the set is empty) }.
  Emits `cleaned` with the count when any was removed.
]]
local rcall = redis.call
local setKey = KEYS[1]
local q = { meta = KEYS[2], events = KEYS[3], listened = KEYS[4] }
local grace = tonumber(ARGV[1])
-- @include now
-- @include events

local bound = nowMs() - grace
local removed, done = {}, 0
for i = 1, #ARGV - 1 do
  local id = ARGV[1 + i]
  local finishedAt = rcall('ZSCORE', setKey, id)
  if finishedAt then
    if tonumber(finishedAt) > bound then
      done = 1
      break
    end
    rcall('ZREM', setKey, id)
    local k = 6 * i - 1
    rcall('UNLINK', KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5])
    removed[#removed + 1] = id
  end
end
if done == 0 and rcall('ZCARD', setKey) == 0 then
  done = 1
end
if #removed > 0 then
  emit(q, 'cleaned', 'count', #removed)
end
return { removed, done }
