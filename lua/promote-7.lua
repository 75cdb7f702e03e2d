--[[
  Moves delayed jobs that are due to the back of `wait`, and says when the next one is due. The caller
  passes the ids with the earliest due times (ZRANGE on `delayed`); the script re-checks each one by
  Redis's clock, so a candidate not yet due, or promoted meanwhile, stays as it is.

  KEYS[1] delayed   ZSET   <prefix>:{q}:delayed (id -> due time, ms)
  KEYS[2] wait      LIST   <prefix>:{q}:wait
  KEYS[3] marker    ZSET   <prefix>:{q}:marker
  KEYS[4] meta      HASH   <prefix>:{q}:meta
  KEYS[5] events    STREAM <prefix>:{q}:events
  KEYS[6] listened  ZSET   <prefix>:{q}:listened
  KEYS[7] prioritized ZSET <prefix>:{q}:prioritized (a job with a priority goes there, behind its equals)
  KEYS[7 + i]       HASH   job i       (i = 1 .. n; its id is the key's last part, <prefix>:{q}:<id>)

  ARGV[1] 1 to re-arm the marker for the next due time (a caller that will not wait for it itself,
          the sweep), else 0 (a worker, which sets its own timer from the reply)

  Returns { how many jobs it promoted, ms until the next delayed job is due (-1 when none is left), its due
  time (ms, Redis's clock; -1 when none) }. Emits `waiting` (prev `delayed`) per job promoted.
]]
local rcall = redis.call
local q = {
  delayed = KEYS[1], wait = KEYS[2], marker = KEYS[3], meta = KEYS[4], events = KEYS[5], listened = KEYS[6], prioritized = KEYS[7],
}
local rearm = ARGV[1] == '1'
-- @include now
-- @include events
-- @include score
-- @include enter

local now = nowMs()
-- Formatted once: Lua formats a number it passes to Redis with printf's '%.17g'.
local nowText = string.format('%d', now)
local promoted = {}
-- A job's key is <prefix>:{q}:<id>: its id starts after the length of `wait`'s key less 'wait'.
local base = #q.wait - 4
-- The promoted jobs without a priority, pushed on `wait` in one command, in the order given (one LPUSH a job
-- would leave the same list).
local back = {}
local n = #KEYS - 7
-- The given ids that are due: the first n due in `delayed`, by member (a score read back costs Redis a
-- printf a member). The caller gives the earliest ids, so these are them, unless earlier ones came
-- meanwhile: only then (n due, and not all of them given) are the rest asked for by score. An id given
-- twice is promoted once (`due` forgets it).
local due = {}
if n > 0 then
  local first = rcall('ZRANGEBYSCORE', q.delayed, '-inf', nowText, 'LIMIT', '0', string.format('%d', n))
  for i = 1, #first do
    due[first[i]] = true
  end
  for i = 1, n do
    local jobKey = KEYS[7 + i]
    local id = string.sub(jobKey, base + 1)
    if due[id] == nil and #first == n then
      local score = rcall('ZSCORE', q.delayed, id)
      due[id] = score ~= false and tonumber(score) <= now
    end
    if due[id] then
      due[id] = false
      promoted[#promoted + 1] = id
      -- As enterWait, in one write: the state, and when it joined the line. The due time stays (read only
      -- while delayed, written again on every way in); a delay of its own (a retry's backoff, a
      -- moveToDelayed, a changeDelay) is BullMQ's job.delay only while it waits, so it goes.
      local f = rcall('HMGET', jobKey, 'priority', 'lastDelay')
      if f[2] then
        rcall('HDEL', jobKey, 'lastDelay')
      end
      local priority = tonumber(f[1]) or 0
      if priority > 0 then
        rcall('HSET', jobKey, 'state', 'prioritized', 'waitingSince', nowText)
        joinLine(q, id, false, priority)
      else
        rcall('HSET', jobKey, 'state', 'wait', 'waitingSince', nowText)
        back[#back + 1] = id
      end
      emit(q, 'waiting', 'jobId', id, 'prev', 'delayed')
    end
  end
end
if #promoted > 0 then
  rcall('ZREM', q.delayed, unpack(promoted))
  if #back > 0 then
    rcall('LPUSH', q.wait, unpack(back))
  end
  rcall('ZADD', q.marker, '0', '0')
end
local nextDue = rcall('ZRANGE', q.delayed, '0', '0', 'WITHSCORES')[2]
if nextDue and rearm then
  rcall('ZADD', q.marker, 'LT', nextDue, 'd')
end
if not nextDue then
  return { #promoted, -1, -1 }
end
return { #promoted, math.max(0, tonumber(nextDue) - now), tonumber(nextDue) }
