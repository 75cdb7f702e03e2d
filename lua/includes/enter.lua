-- Moves into the waiting states. `q` holds the queue's keys: { wait, prioritized, delayed, marker, meta }.
-- The marker wakes idle workers: member '0' (score 0) means work in `wait` or `prioritized`; member 'd'
-- scored with the earliest due time a worker should know of (ZADD LT keeps the earliest), so an idle
-- worker learns when to promote delayed jobs without polling.

-- Where a job with a priority waits: `prioritized`, scored priority * 2^32 plus a counter (meta's `pc`),
-- so the lowest number runs first and jobs of one priority in the order they came (BullMQ's scoring).
-- At the front of its priority (a recovery, a release) the counter part is 0.
local PRIORITY_SCALE = 4294967296
-- No more fields to write (enterWait, enterDelayed). Numbers go to Redis as text where they can: one Lua
-- passes is formatted with printf's '%.17g', some 2,500 instructions.
local NO_FIELDS = {}
local function prioritizedScore(q, priority, front)
  local seq = front and 0 or (rcall('HINCRBY', q.meta, 'pc', '1') % PRIORITY_SCALE)
  return string.format('%.0f', priority * PRIORITY_SCALE + seq)
end

-- Into `wait`, at the front (served next: recoveries and releases; a lifo add) or at the back; a job with
-- a priority into `prioritized` (the front of its priority, or behind its equals). `priority` is the job's
-- when the caller knows it, else read from the hash. `waitingSince` is when it joined the line; a job just
-- added (`fresh`) goes without it: it joined at `createdOn`, which readers use when it is absent.
-- Into the line only: `wait` (front or back), or `prioritized` for a job with a priority; the job's
-- state and the marker are the caller's (add-7.lua writes the state with the job and tells the marker
-- once per call, however many jobs it adds).
local function joinLine(q, id, front, priority)
  if priority > 0 then
    rcall('ZADD', q.prioritized, prioritizedScore(q, priority, front), id)
  elseif front then
    rcall('RPUSH', q.wait, id)
  else
    rcall('LPUSH', q.wait, id)
  end
end

-- `more`: fields the caller writes with the state (field, value, ...), in the same HSET: a finish's receipt,
-- a failed attempt's record. The marker is told once per call (`q.woken`): nothing in a script takes it
-- back between two jobs entering the line.
local function enterWait(jobKey, q, id, now, front, priority, fresh, more)
  priority = priority or tonumber(rcall('HGET', jobKey, 'priority')) or 0
  local state = priority > 0 and 'prioritized' or 'wait'
  if fresh then
    rcall('HSET', jobKey, 'state', state, unpack(more or NO_FIELDS))
  else
    rcall('HSET', jobKey, 'state', state, 'waitingSince', now, unpack(more or NO_FIELDS))
  end
  joinLine(q, id, front, priority)
  if not q.woken then
    rcall('ZADD', q.marker, '0', '0')
    q.woken = true
  end
end

-- Into `delayed` until `due` (ms, Redis clock; scored in order within its millisecond, see score.lua), with
-- `more` written with the state as enterWait's.
-- The marker is told only when the job is now the first due: whoever waits for an earlier one learns of
-- this one when it promotes (promote's reply), and busy workers from their next take or finish, so a
-- burst of delayed adds wakes no worker more than once. Whether it is first is asked after the ZADD, by
-- member: a score read back is formatted by Redis (printf's %.17g), several times the cost of an id.
-- Needs the score include.
local function enterDelayed(jobKey, q, id, due, more)
  rcall('HSET', jobKey, 'state', 'delayed', 'dueAt', due, unpack(more or NO_FIELDS))
  rcall('ZADD', q.delayed, scoreAt(q.delayed, due), id)
  if rcall('ZRANGE', q.delayed, '0', '0')[1] == id then
    rcall('ZADD', q.marker, 'LT', due, 'd')
  end
end
