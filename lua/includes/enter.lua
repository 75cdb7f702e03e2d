-- Moves into the waiting states. `q` holds the queue's keys: { wait, delayed, marker, ... }.
-- The marker wakes idle workers: member '0' (score 0) means work in `wait`; member 'd' scored with the
-- earliest due time a worker should know of (ZADD LT keeps the earliest), so an idle worker learns when
-- to promote delayed jobs without polling.

-- Into `wait`: at the front (served next: recoveries and releases) or at the back.
local function enterWait(jobKey, q, id, now, front)
  redis.call('HSET', jobKey, 'state', 'wait', 'waitingSince', now)
  if front then
    redis.call('RPUSH', q.wait, id)
  else
    redis.call('LPUSH', q.wait, id)
  end
  redis.call('ZADD', q.marker, 0, '0')
end

-- Into `delayed` until `due` (ms, Redis clock; scored in order within its millisecond, see score.lua).
-- The marker is told only when the job is now the first due: whoever waits for an earlier one learns of
-- this one when it promotes (promote's reply), and busy workers from their next take or finish, so a
-- burst of delayed adds wakes no worker more than once. Needs the score include.
local function enterDelayed(jobKey, q, id, due)
  redis.call('HSET', jobKey, 'state', 'delayed', 'dueAt', due)
  local first = redis.call('ZRANGE', q.delayed, 0, 0, 'WITHSCORES')[2]
  redis.call('ZADD', q.delayed, scoreAt(q.delayed, due), id)
  if not first or due < tonumber(first) then
    redis.call('ZADD', q.marker, 'LT', due, 'd')
  end
end
