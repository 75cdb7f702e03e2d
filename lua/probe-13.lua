--[[
  The sweep's first call on a queue, touching only the queue's own keys: its counts, and the candidates
  for the steps that need per-job keys (which the caller then passes to sweep-10.lua, promote-7.lua,
  iterate-11.lua and trim-2.lua). For an idle queue it is the only call. It also repairs what a dead worker leaves besides
  its leases: reservations past their expiry go back where they were (they touch no job hash;
  reservations.lua), and a lost wake-up: while jobs wait the marker says so, and when the earliest
  delayed job is due within two minutes the marker names its due time, so an idle worker (even one that
  missed the add) wakes and takes or promotes them. Expired reservations beyond this call's share are
  returned by requeue-5.lua, which the sweep calls next while this one returned a full share. For a queue
  served by worker functions it also reads the backlog that scales them (what backlog-5.lua reads), so the
  reaper's pass over such a queue needs no call of its own for it.

  KEYS[1] active     ZSET  <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[2] stalled    ZSET  <prefix>:{q}:stalled
  KEYS[3] wait       LIST  <prefix>:{q}:wait
  KEYS[4] delayed    ZSET  <prefix>:{q}:delayed (id -> due time, ms)
  KEYS[5] completed  ZSET  <prefix>:{q}:completed
  KEYS[6] failed     ZSET  <prefix>:{q}:failed
  KEYS[7] marker     ZSET  <prefix>:{q}:marker
  KEYS[8] meta       HASH  <prefix>:{q}:meta (failedNew count and its claim, retention limits)
  KEYS[9] reserved   ZSET  <prefix>:{q}:reserved (id -> reservation expiry, ms)
  KEYS[10] prioritized     ZSET  <prefix>:{q}:prioritized
  KEYS[11] reservedScores  HASH  <prefix>:{q}:reservedScores
  KEYS[12] schedulers      ZSET  <prefix>:{q}:schedulers (job scheduler id -> due time of its next period, ms)
  KEYS[13] invocations     ZSET  <prefix>:{q}:invocations (worker-function invocation id -> lease end, ms;
                                 read only with ARGV[5] = 1)
  KEYS[14 .. 13+m] STRING  the leases <prefix>:{q}:<id>:lock of the m jobs ARGV[8..] names
  KEYS[14+m] (optional) HASH the job <prefix>:{q}:<id> of ARGV[6]: read only if that job is still next in line

  ARGV[1] most candidates per list below (expired reservations: ten times as many, at most 1000; see
          requeue-5.lua for the rest)
  ARGV[2] audit window size (in-flight jobs checked whatever their deadline; 0 for none)
  ARGV[3] where the audit window starts, as a fraction of the in-flight jobs (0..1, random)
  ARGV[4] 1 to read the count of jobs that entered `failed` and that no live reaper invocation has claimed
          (the reaper's JobsFailed; read only: the reaper claims them with claim-1.lua when this is above
          0, so an idle queue costs no other call), 0 not to
  ARGV[5] 1 to read the backlog of worker functions (the reaper, for a queue in WORKER_FUNCTIONS), 0 not to
  ARGV[6] the id the caller saw next in line at its last probe ('' for none): when it still is, its
          `waitingSince` (else `createdOn`) is returned, so a backlog that does not move costs no read of its
          own (the reaper keeps what each queue's probe returned; KEYS[14+m] is that job's hash)
  ARGV[7] m, the number of ids below
  ARGV[8 .. 7+m] in-flight ids whose leases the caller passes (those of its last probe's audit window): an
          id of this audit window whose lease is there is left out of the audit, so a queue whose jobs in
          flight are the same, alive, costs no audit call of its own

  Returns { now (ms), { wait (reserved and prioritized jobs included), active, stalled, delayed, completed,
  failed, prioritized }, failed jobs to claim (meta's `failedNew`, never below 0, plus an expired claim's;
  0 when not asked), expired lease ids,
  audit ids (the window less the jobs whose lease this call saw), due delayed ids, completed ids to trim, failed ids to trim, the id next in line or false,
  reservations returned, ids of the job schedulers whose next period is due, the backlog or false: { jobs
  ready to run (waiting, prioritized, and delayed ones already due; 0 while paused), worker-function
  invocations alive, 1 when paused else 0 } after the reservations returned above, when the job next in line
  joined it (ms) if it is ARGV[6]'s job, else false, the audit window's ids (all of them) }.
]]
local rcall = redis.call
local activeKey, stalledKey, waitKey, delayedKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local completedKey, failedKey, markerKey, metaKey, reservedKey = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local q = { reserved = reservedKey, wait = waitKey, marker = markerKey, prioritized = KEYS[10], reservedScores = KEYS[11] }
local schedulersKey, invocationsKey = KEYS[12], KEYS[13]
local limit, auditSize, auditAt, readFailures = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
local readBacklog = ARGV[5] == '1'
-- How far ahead a delayed job's due time is put in the marker for an idle worker (ms): two sweeps apart.
local REARM_HORIZON_MS = 120000
-- @include now
-- @include retention
-- @include reservations

local now = nowMs()
-- Reservations past their expiry: their worker died, or closed without a word. Oldest first, each back
-- where it was (they were next in line when reserved). Up to ten times the step limit (at most 1000,
-- well under a millisecond): each costs two commands, and a crash of many busy workers leaves many.
local expiredReservations = rcall('ZRANGEBYSCORE', reservedKey, '-inf', now, 'LIMIT', 0, math.min(limit * 10, 1000))
if #expiredReservations > 0 then
  rcall('ZREM', reservedKey, unpack(expiredReservations))
  putBack(q, expiredReservations)
end
local counts = {
  rcall('LLEN', waitKey), rcall('ZCARD', activeKey), rcall('ZCARD', stalledKey),
  rcall('ZCARD', delayedKey), rcall('ZCARD', completedKey), rcall('ZCARD', failedKey), rcall('ZCARD', q.prioritized),
}
local waiting, inFlight, delayed = counts[1], counts[2], counts[4]
local prioritized = counts[7]
-- Reserved prioritized jobs are still prioritized jobs waiting.
counts[7] = prioritized + rcall('HLEN', q.reservedScores)
counts[1] = waiting + prioritized + rcall('ZCARD', reservedKey)

local failedNew = 0
if readFailures then
  local f = rcall('HMGET', metaKey, 'failedNew', 'failedClaimed', 'failedClaimUntil')
  failedNew = math.max(0, tonumber(f[1]) or 0)
  -- A claim whose lease ended: its invocation died before settling it, the next claim takes it over.
  if f[3] and tonumber(f[3]) <= now then
    failedNew = failedNew + (tonumber(f[2]) or 0)
  end
end

local knownLeases = tonumber(ARGV[7]) or 0
local expired, audit, window = {}, {}, {}
if inFlight > 0 then
  expired = rcall('ZRANGEBYSCORE', activeKey, '-inf', now, 'LIMIT', 0, limit)
  if auditSize > 0 then
    local start = math.floor(auditAt * math.max(0, inFlight - auditSize))
    window = rcall('ZRANGE', activeKey, start, start + auditSize - 1)
    audit = window
  end
end
-- A lease that is there needs no audit (the audit looks for leases gone before their deadline); a job
-- with a lease is never marked (whatever writes a lease clears the mark). Only the leases passed are read.
if knownLeases > 0 and #window > 0 then
  local leaseKey = {}
  for i = 1, knownLeases do
    leaseKey[ARGV[7 + i]] = KEYS[13 + i]
  end
  local keys, at = {}, {}
  for i, id in ipairs(window) do
    if leaseKey[id] then
      keys[#keys + 1] = leaseKey[id]
      at[i] = #keys
    end
  end
  if #keys > 0 then
    local leases = rcall('MGET', unpack(keys))
    audit = {}
    for i, id in ipairs(window) do
      if not (at[i] and leases[at[i]]) then
        audit[#audit + 1] = id
      end
    end
  end
end

-- The backlog of worker functions (backlog-5.lua's reading): a paused queue has nothing ready.
local backlog = false
if readBacklog then
  local live = rcall('ZCOUNT', invocationsKey, '(' .. now, '+inf')
  local paused = rcall('HEXISTS', metaKey, 'paused')
  local ready = 0
  if paused == 0 then
    ready = waiting + prioritized + (delayed > 0 and rcall('ZCOUNT', delayedKey, '-inf', now) or 0)
  end
  backlog = { ready, live, paused }
end

local due = {}
if delayed > 0 then
  due = rcall('ZRANGEBYSCORE', delayedKey, '-inf', now, 'LIMIT', 0, limit)
  -- Only a due time near enough: an idle worker woken for a job due in a month would only set its timer
  -- again, every sweep. One due soon wakes a worker in time even if the one holding the timer died.
  local first = rcall('ZRANGE', delayedKey, 0, 0, 'WITHSCORES')[2]
  if tonumber(first) <= now + REARM_HORIZON_MS then
    rcall('ZADD', markerKey, 'LT', first, 'd')
  end
end

-- The oldest finished jobs of a set past its limits (the limits in `meta`, see retention.lua).
local function trimCandidates(setKey, set, size)
  if size == 0 then
    return {}
  end
  local count, age = parseKeep(rcall('HGET', metaKey, KEEP_FIELDS[set].meta))
  local over = count ~= nil and size > count
  local old = false
  if age ~= nil and not over then
    local oldest = rcall('ZRANGE', setKey, 0, 0, 'WITHSCORES')[2]
    old = oldest ~= nil and tonumber(oldest) <= now - age
  end
  if over or old then
    return rcall('ZRANGE', setKey, 0, limit - 1)
  end
  return {}
end

local head = false
if waiting > 0 then
  head = rcall('LINDEX', waitKey, -1)
elseif prioritized > 0 then
  head = rcall('ZRANGE', q.prioritized, 0, 0)[1]
end
local headSince = false
if head then
  rcall('ZADD', markerKey, 0, '0')
  local headKey = KEYS[14 + knownLeases]
  if head == ARGV[6] and headKey then
    local at = rcall('HMGET', headKey, 'waitingSince', 'createdOn')
    headSince = at[1] or at[2] or false
  end
end
-- Schedules whose next period is due: made when it falls due whether or not its run was made ahead (one
-- is only while a worker runs them), so a schedule with no worker keeps producing (iterate-11.lua).
local dueSchedulers = rcall('ZRANGEBYSCORE', schedulersKey, '-inf', now, 'LIMIT', 0, limit)
return {
  now, counts, failedNew, expired, audit, due,
  trimCandidates(completedKey, 'completed', counts[5]), trimCandidates(failedKey, 'failed', counts[6]), head,
  #expiredReservations, dueSchedulers, backlog, headSince, window,
}
