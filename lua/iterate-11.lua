--[[
  Advances a job scheduler, in one step, for whoever does it: a worker's promoter or the sweep (the
  Lambda's, `echomq sweep`'s) when its next period falls due, a worker that starts one of its runs, an
  operator's promoteJob. So a schedule keeps producing with no worker running, and while workers keep up
  it has one run pending, as BullMQ's:
    1. the run the scheduler points at, when it was made (it waits in `delayed`), goes into line when due
       (mode `early`: now, due or not);
    2. the runs due since (a catch-up, computed by the caller from the timing: lib/schedulers/timing.ts
       duePeriods), oldest first, are made straight into line, at most ITERATE_MAX_RUNS a call
       (lib/redis/commands.ts), never past the scheduler's `limit`;
    3. the scheduler points at the period after them; mode `take` (a worker started one of its runs) makes
       that run at once, in `delayed`, as BullMQ makes it; otherwise it is made when it falls due.
  Nothing changes when the scheduler moved meanwhile (its next period or newest run are not what the
  caller read): the caller reads again. Ids are deterministic, so a run that exists is never made twice.
  With nothing left to make and no run of it in `delayed` (limit reached, past endDate), the scheduler ends.

  KEYS[1]  schedulers   ZSET   <prefix>:{q}:schedulers (id -> due time of its next period, ms)
  KEYS[2]  scheduler    HASH   <prefix>:{q}:schedulers:<sid> (`ic` made, `last` the newest run's due time)
  KEYS[3]  delayed      ZSET   <prefix>:{q}:delayed
  KEYS[4]  wait         LIST   <prefix>:{q}:wait
  KEYS[5]  marker       ZSET   <prefix>:{q}:marker
  KEYS[6]  meta         HASH   <prefix>:{q}:meta
  KEYS[7]  events       STREAM <prefix>:{q}:events
  KEYS[8]  listened     ZSET   <prefix>:{q}:listened
  KEYS[9]  prioritized  ZSET   <prefix>:{q}:prioritized
  KEYS[10] pending      HASH   the run the scheduler points at, <prefix>:{q}:repeat:<sid>:<next>
  KEYS[11] after        HASH   the run after those made here, <prefix>:{q}:repeat:<sid>:<after>
  KEYS[11 + i]          HASH   run i made here (i = 1 .. n), <prefix>:{q}:repeat:<sid>:<due i>

  ARGV[1] scheduler id
  ARGV[2] its next period the caller read (ms, as stored)
  ARGV[3] its newest run's due time the caller read (ms, as stored)
  ARGV[4] mode: `due`, `early` or `take` (see above)
  ARGV[5] the due time of the period after the runs (ms); -1 for none (past endDate): the schedule ends
  ARGV[6] the pending run's id
  ARGV[7] the id of the run after them ("" for none)
  ARGV[6 + 2i], ARGV[7 + 2i] run i's id and due time (ms, at most Redis's now; oldest first)

  Returns { "retry" } or { "ok" | "ended", { ids of runs moved from `delayed` into line (the pending one;
  any other due run found there) }, { ids of the runs made into line }, the id of the run made in `delayed`
  (else false) }. Emits `waiting` (prev `delayed`) for a run moved, `added` and `waiting` for each run
  made into line, `added` and `delayed` for one made in `delayed`.
]]
local rcall = redis.call
local q = {
  schedulers = KEYS[1], delayed = KEYS[3], wait = KEYS[4], marker = KEYS[5], meta = KEYS[6], events = KEYS[7], listened = KEYS[8],
  prioritized = KEYS[9],
}
local schedulerKey, pendingKey, afterKey = KEYS[2], KEYS[10], KEYS[11]
local sid, readNext, readLast, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local afterDue, pendingId, afterId = tonumber(ARGV[5]), ARGV[6], ARGV[7]
-- @include now
-- @include events
-- @include score
-- @include enter
-- @include lastDue
-- @include iteration

local at = rcall('ZSCORE', q.schedulers, sid)
if not at or string.format('%.0f', tonumber(at)) ~= readNext or lastDue(schedulerKey, at) ~= readLast then
  return { 'retry' }
end
local now = nowMs()
local ic = tonumber(rcall('HGET', schedulerKey, 'ic')) or 0
local limit = tonumber(rcall('HGET', schedulerKey, 'limit')) or -1
local last = readLast

-- 1. The run it points at, made already: into line when due (or now, early).
local promoted = {}
if readLast == readNext then
  local score = rcall('ZSCORE', q.delayed, pendingId)
  if score and (mode == 'early' or math.floor(tonumber(score)) <= now) then
    promoteIteration(pendingKey, q, pendingId, now)
    promoted[1] = pendingId
  end
end

-- 2. The runs due since, oldest first.
local made = {}
for i = 1, (#ARGV - 7) / 2 do
  if limit >= 0 and ic >= limit then
    break
  end
  local id, due = ARGV[6 + 2 * i], tonumber(ARGV[7 + 2 * i])
  if createIteration(schedulerKey, KEYS[11 + i], q, sid, id, due, now, true) then
    ic = ic + 1
    made[#made + 1] = id
  elseif rcall('ZSCORE', q.delayed, id) then
    -- Made ahead by a producer that kept no `last` (an older version): due, so into line too.
    promoteIteration(KEYS[11 + i], q, id, now)
    promoted[#promoted + 1] = id
  end
  last = ARGV[7 + 2 * i]
end

-- 3. The period after them; made now in `delayed` for a worker that started a run.
local inDelayed = false
if afterDue >= 0 and mode == 'take' and (limit < 0 or ic < limit) then
  if createIteration(schedulerKey, afterKey, q, sid, afterId, afterDue, now, false) then
    ic = ic + 1
    inDelayed = afterId
  end
  last = string.format('%.0f', afterDue)
end
if afterDue < 0 or (limit >= 0 and ic >= limit and last ~= string.format('%.0f', afterDue)) then
  rcall('ZREM', q.schedulers, sid)
  rcall('DEL', schedulerKey)
  return { 'ended', promoted, made, inDelayed }
end
rcall('ZADD', q.schedulers, string.format('%.0f', afterDue), sid)
rcall('HSET', schedulerKey, 'ic', ic, 'last', last)
return { 'ok', promoted, made, inDelayed }
