--[[
  Takes candidate jobs and gives each a lease, in one step, so a crash can never leave a job out of
  `wait` without a lease. The candidates are ids the worker reserved earlier (see reserveNext in
  takeJobs.lua), or ids it read from the tail of `wait` or the head of `prioritized`; a candidate another
  worker took meanwhile is skipped. Nothing is taken while the queue is paused, and no more than the
  worker's limiter lets start (takeJobs.lua admission). Candidates read from the line race with other
  workers: for each one found gone, the same call reserves another id for this worker (at most ARGV[8];
  takeJobs.lua reserveNext), which its next take gets for certain, so a worker with free slots never
  waits on the marker while jobs are ready.

  KEYS[1]  wait            LIST   <prefix>:{q}:wait
  KEYS[2]  active          ZSET   <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[3]  marker          ZSET   <prefix>:{q}:marker
  KEYS[4]  reserved        ZSET   <prefix>:{q}:reserved (id -> reservation expiry, ms)
  KEYS[5]  delayed         ZSET   <prefix>:{q}:delayed (id -> due time, ms)
  KEYS[6]  meta            HASH   <prefix>:{q}:meta (paused, limitedUntil, the global concurrency and rate limit)
  KEYS[7]  events          STREAM <prefix>:{q}:events
  KEYS[8]  listened        ZSET   <prefix>:{q}:listened
  KEYS[9]  prioritized     ZSET   <prefix>:{q}:prioritized
  KEYS[10] reservedScores  HASH   <prefix>:{q}:reservedScores (reserved id -> its score in prioritized)
  KEYS[11] limiter         ZSET   <prefix>:{q}:limiter (<job id>:<start number> -> start time, ms)
  KEYS[12 + 2i]            HASH   job i       (i = 0 .. n-1)
  KEYS[13 + 2i]            STRING lease of job i

  ARGV[1] worker token (the lease value is "<worker token>:<start number>")
  ARGV[2] lease duration (ms)
  ARGV[3] worker name (recorded on each job taken)
  ARGV[4] most bytes of job data in the reply (at least one job is taken whatever its size)
  ARGV[5] "r" when the candidates are reserved by this worker, "w" when read from `wait` or `prioritized`
  ARGV[6] the worker's limiter: most starts per window (0 for none)
  ARGV[7] the limiter's window (ms)
  ARGV[8] most ids to reserve in place of candidates found gone (0 for none)
  ARGV[9] how long a reservation lasts (ms)
  (The candidates' ids are read from their job keys, KEYS[12 + 2i]: see takeJobs.lua idOf.)

  Returns { { id, n, n job fields, id, n, n job fields, ... } (the run's token is "<worker token>:<attemptsStarted>",
  attemptsStarted absent for 1; createdOn as its digits after those it shares with `now`; name and data by
  place, then only the fields present, each prefixed by the letter of its place, with startedOn in the
  token's place when it is not `now`: see takeJobs.lua replyFields), candidates left, ms until the earliest
  delayed job is due (-1: none), its due time (ms; -1: none), ms to wait before taking again (0: none; -1:
  paused; -2: at the queue's global concurrency), ids reserved in place of candidates found gone, now (ms, Redis's clock) } (see takeJobs.lua and
  nextDue.lua).
]]
local rcall = redis.call
local q = {
  wait = KEYS[1], active = KEYS[2], marker = KEYS[3], reserved = KEYS[4], delayed = KEYS[5], meta = KEYS[6], events = KEYS[7],
  listened = KEYS[8], prioritized = KEYS[9], reservedScores = KEYS[10], limiter = KEYS[11],
}
local taker = {
  token = ARGV[1], leaseMs = ARGV[2], name = ARGV[3], maxBytes = tonumber(ARGV[4]), max = tonumber(ARGV[6]),
  duration = tonumber(ARGV[7]),
}
local candidates = { firstKey = 12, count = (#KEYS - 11) / 2, reserved = ARGV[5] == 'r' }
local missMax, reserveMs = tonumber(ARGV[8]), tonumber(ARGV[9])
-- @include now
-- @include starts
-- @include events
-- @include skiplist
-- @include takeJobs
-- @include nextDue

local now = nowMs()
local taken, left, wait, takenCount = takeJobs(q, taker, now, candidates)
keepSkiplist(q.active)
local gone = candidates.count - takenCount - #left
local reserved = reserveNext(q, taker, math.min(gone, missMax), now + reserveMs)
-- Chain wake-ups: another idle worker wakes while work remains.
if (#taken > 0 or #reserved > 0) and (rcall('LLEN', q.wait) > 0 or rcall('ZCARD', q.prioritized) > 0) then
  rcall('ZADD', q.marker, 0, '0')
end
local dueIn, dueAt = nextDue(q.delayed, now)
return { taken, left, dueIn, dueAt, wait, reserved, now }
