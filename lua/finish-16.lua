--[[
  Ends one or more runs of a worker (those that ended in the same tick), each fenced by its token: a run
  that no longer owns its job (recovered, or held by another worker) changes nothing. In the same call
  the worker takes its next jobs (candidates it reserved or read earlier, re-checked as in take-11.lua),
  takes the jobs it started from its hand since its last call (takeJobs.lua confirmStarts; first, so a
  run started and ended between two calls could end in the same one), reads the
  next one into its hand (readHand: reserved, not taken) and reserves or peeks at the ids after them: a
  busy worker makes about one round trip per batch. A call with no run (m = 0) only confirms starts and
  reads the hand.
  What every run does (leaving `active`, filing completed jobs, counting them) is one command per call.

  KEYS[1]  active          ZSET   <prefix>:{q}:active
  KEYS[2]  stalled         ZSET   <prefix>:{q}:stalled
  KEYS[3]  wait            LIST   <prefix>:{q}:wait
  KEYS[4]  completed       ZSET   <prefix>:{q}:completed
  KEYS[5]  failed          ZSET   <prefix>:{q}:failed
  KEYS[6]  marker          ZSET   <prefix>:{q}:marker
  KEYS[7]  delayed         ZSET   <prefix>:{q}:delayed
  KEYS[8]  meta            HASH   <prefix>:{q}:meta (failedNew count, retention limits, `parents`, `adopted`, limits)
  KEYS[9]  reserved        ZSET   <prefix>:{q}:reserved (id -> reservation expiry, ms)
  KEYS[10] events          STREAM <prefix>:{q}:events
  KEYS[11] listened        ZSET   <prefix>:{q}:listened
  KEYS[12] metrics         HASH   <prefix>:{q}:metrics (finished jobs per minute, see minutes.lua)
  KEYS[13] prioritized     ZSET   <prefix>:{q}:prioritized
  KEYS[14] reservedScores  HASH   <prefix>:{q}:reservedScores (reserved id -> its score in prioritized)
  KEYS[15] limiter         ZSET   <prefix>:{q}:limiter (<job id>:<start number> -> start time, ms)
  KEYS[16] handoffs        HASH   <prefix>:{q}:handoffs (a flow's child ended: what its parent must learn)
  KEYS[17 + 2j], KEYS[18 + 2j]  HASH, STRING: job and lease of candidate j to take (j = 0 .. k-1, k = c - h)
  KEYS[17 + 2k + j]             HASH: job of candidate j to read into the hand (j = 0 .. h-1; a read takes
                                no lease)
  KEYS[17 + 2k + h + 2s], KEYS[18 + 2k + h + 2s]  HASH, STRING: job and lease of start s to confirm (s = 0 ..
                                v-1)
  KEYS[17 + 2k + h + 2v ..]    for each run in turn: HASH, STRING, then LIST unless its action is "c": its
                                job, lease and log; then with "&" (see ARGV) SET, HASH, HASH, ZSET: its
                                dependencies, processed, failed and unsuccessful (a flow's parent's keys)
  (Every id is read from its job's key: takeJobs.lua idOf.)

  ARGV[1]  m, the number of runs
  ARGV[2]  a random number in [0, 1), for the backoffs' jitter
  ARGV[3]  worker token, for the jobs taken next, and the runs and starts sent by their start number ("" for
           none: every token is sent whole)
  ARGV[4]  lease duration (ms), for the jobs taken next
  ARGV[5]  worker name, recorded on the jobs taken next
  ARGV[6]  most bytes of job data taken next (see takeJobs.lua)
  ARGV[7]  "r" when the candidates are reserved by this worker, "w" when read from `wait`
  ARGV[8]  how many ids to reserve from the tail of `wait` for the calls after (0 for none)
  ARGV[9]  how long a reservation lasts (ms)
  ARGV[10] how many ids to peek at from the head of the line, without reserving them (0 for none)
  ARGV[11] the worker's limiter: most starts per window (0 for none)
  ARGV[12] the limiter's window (ms)
  ARGV[13] h, how many of the candidates (the last h) to read into the hand rather than take
  ARGV[14] v, how many starts to confirm
  ARGV[15] c, how many candidates
  ARGV[16 + 2s], ARGV[17 + 2s] for start s to confirm: the run's token (a start number alone for
           "<ARGV[3]>:<n>", see takeJobs.lua tokenOf), "1" when the hand read it with a priority (else "0")
  ARGV[16 + 2v ..] for each run in turn: its action, then its token when the action says "!", its value,
           then for "f" and "F" the error's stack (kept in the job's `stacktrace`, see useAttempt.lua; or with
           "$" the stacktrace to store). The
           action: "c" | "C" complete ("c": the job stays filed whatever its retention, so its log's key
           is not sent; a job whose retention is "0" is filed, for a trim to remove with its log) | "f"
           fail (uses an attempt; a retry waits the job's backoff) | "F" fail-final (an
           UnrecoverableError: to `failed` whatever attempts remain) | "r" release (back to wait, served
           next, no attempt used); then the run's start number when it is not 1 (the token is
           "<ARGV[3]>:<n>"), or "!" (the token follows, whole); then "+" unless the run is plain (its job,
           as taken, had none of attemptsMade, keep, deid and parentKey, which fields a plain run's finish
           does not read: none of them is written while the run holds the job, but for a job that joins a parent,
           which sets meta's `adopted`: then no run is read as plain); then "$" when a fail's stack is the
           job's stacktrace as it is to be stored (JSON text, "" for no change: the worker has the stored list
           and the job's stackTraceLimit), else it is the run's stack alone; then "&" when the job is a flow's
           parent (its hash's `deps`, as taken, or as a "p" said) and the action is not "c": its four flow
           keys follow its log's, and go with it when the run removes it at once (counted out of meta's
           `parents`, parents.lua); then "^" when the run sends the key of its deduplication id's next job
           (HASH, after its other keys: the job an add stored while the run held the id, keepLastIfActive,
           lua/includes/nextJob.lua, which an "n" named); then optionally "@<ms>" (a fail's retry
           waits this, from the worker's settings.backoffStrategy) and "#<keep>" (the worker's retention
           for a job with none of its own, as retention.lua reads it). The value: the return value (JSON
           text) for complete, the error message for fail.

  Returns { runs, details, taken, reserved ids, peeked ids, candidates left, ms until the earliest delayed
  job is due, its due time, when the runs finished (ms), ms to wait before taking again (0: none; -1:
  paused; -2: at the global concurrency), handed, confirmed, now (ms, Redis's clock) }, each list (details, taken, the ids, handed) false
  (a null) when empty,
  where runs holds one character per run, in order: "c" when it completed with nothing more to say ({ "ok",
  "completed", "", "" }), "w" when it went back to wait with nothing more to say ({ "ok", "wait", "", "" }),
  "d" when it went to `delayed` with nothing more to say but its backoff (ms), the next entry of details,
  "h" when a flow's child completed with nothing more to say but its hand-off, the next entry of details,
  "p" when the run changed nothing, as its job is a parent (it became one while the run held it, which a
  non-plain run reads: adoptChild-4.lua sets meta's `adopted`) that the run would remove at once without its
  flow keys, which did not come: the worker sends it again with "&",
  "n" when the run changed nothing, as its job holds a deduplication id with a next job stored (the next
  entry of details: its id) whose key did not come: the worker sends it again with "^" and that key,
  "." for the next entry of details: { "ok" | "lost", new (or current) state, set
  to trim, hand-off[, backoff][, oldest] } (backoff: a retry's wait in `delayed`, ms, only then; false when
  oldest follows without one). The hand-off is the entry a flow's child wrote for its parent
  (lua/includes/handoff.lua), else ""; the set to trim is "completed" or "failed" when it has just grown
  past its retention by another `slack` jobs (the worker then runs trim-2.lua, see retention.lua), else "",
  and oldest, with a trim's first ask only (retention.lua trimDue), that set's oldest ids (at most
  TRIM_BATCH), the trim's first candidates; taken is { id, n, n job fields, ... } as in take-11.lua; peeked
  ids are next first; the due times are -1 when no job is delayed (nextDue.lua); handed is { id, n, n job
  fields, ... } for the jobs read into the hand (fields as taken's); confirmed holds one character per start
  ("1" taken, "0" lost: its reservation was gone).
]]
local rcall = redis.call
local q = {
  active = KEYS[1], stalled = KEYS[2], wait = KEYS[3], completed = KEYS[4], failed = KEYS[5], marker = KEYS[6], delayed = KEYS[7],
  meta = KEYS[8], reserved = KEYS[9], events = KEYS[10], listened = KEYS[11], prioritized = KEYS[13], reservedScores = KEYS[14],
  limiter = KEYS[15],
}
local metricsKey, handoffsKey = KEYS[12], KEYS[16]
-- A count sent as text: most are "0", and tonumber parses with strtod, as costly as a small command.
local function count(text)
  if text == '0' then
    return 0
  end
  return tonumber(text)
end
local m, roll = count(ARGV[1]), tonumber(ARGV[2])
local taker = {
  token = ARGV[3], leaseMs = ARGV[4], name = ARGV[5], maxBytes = tonumber(ARGV[6]), max = count(ARGV[11]), duration = count(ARGV[12]),
}
local reserve, reserveMs, peek = count(ARGV[8]), tonumber(ARGV[9]), count(ARGV[10])
local h, v, c = count(ARGV[13]), count(ARGV[14]), count(ARGV[15])
local candidates = { firstKey = 17, count = c - h, reserved = ARGV[7] == 'r' }
local hand = { firstKey = 17 + 2 * (c - h), count = h }
local starts = { firstKey = 17 + 2 * (c - h) + h, firstArg = 16, count = v }
-- @include now
-- @include starts
-- @include events
-- @include score
-- @include retention
-- @include skiplist
-- @include takeJobs
-- @include nextDue
-- @include minutes

-- What only a failure, a release, a deduplicated job or a flow's child needs, made the first time a run of
-- the call does: each function a script defines is a closure made on every call (with its upvalues, and
-- collected after), and most calls end plain completions only.
local rare
local function rarely()
  if not rare then
    -- @include enter
    -- @include backoff
    -- @include releaseDeduplication
    -- @include useAttempt
    -- @include handoff
    -- @include parents
    rare = {
      enterWait = enterWait, enterDelayed = enterDelayed, useAttempt = useAttempt, releaseDeduplications = releaseDeduplications,
      handOff = handOff, countOutParents = countOutParents,
    }
  end
  return rare
end

-- The next jobs of deduplication ids (keepLastIfActive), made only by a call that meets one.
local nextOnes
local function nexts()
  if not nextOnes then
    local r = rarely()
    local enterWait, enterDelayed = r.enterWait, r.enterDelayed
    -- @include nextSpec
    -- @include nextJob
    nextOnes = { decodeNext = decodeNext, addNextJob = addNextJob }
  end
  return nextOnes
end

local now = nowMs()
-- Integers are formatted with '%d': tostring formats a number with printf's '%.14g', several times the cost.
local nowText = string.format('%d', now)
-- Whether a retention removes a job at once, parsed once per text (most runs of a call share one).
local atOnce = {}
local function removedAtOnce(keep)
  local r = atOnce[keep]
  if r == nil then
    r = parseKeep(keep) == 0
    atOnce[keep] = r
  end
  return r
end
-- Jobs started from the hand are taken first: a run started and ended in the same tick ends in this call too.
local confirmed = confirmStarts(q, taker, now, starts)
-- Per run its outcome: DONE (a run completed with nothing more to say, most of them) or its entry.
local DONE = {}
local runs = {}
-- What the runs that ended here leave behind, done once for all: `active`, `stalled` and their leases;
-- the completed jobs filed (in order), with the limits of the last; the counts for the chart.
local gone, leases, filed = {}, {}, {}
-- The deduplication ids the completed runs held, released together after the loop, and their jobs.
local holds, holders = {}, {}
-- The completed children's hand-offs (id, entry, ...), written to `handoffs` in one HSET after the loop.
local outbox = {}
local lastKeep, lastFiled, completedCount, failedCount = nil, 0, 0, 0
local released = false
-- A replayed call (its reply was lost to a dropped connection, and ioredis sent it again): when it ended.
local replays, replayAt = 0, 0
-- Parents removed at once with their flow keys, counted out of meta's `parents` together after the loop.
local parentsGone = 0
-- A run whose job became a parent while it ran, left as it was for the worker to send again ("p"). Not a
-- table: most calls have none, and a table is made on every call.
local AGAIN = false
-- Runs have KEYS and ARGV of their own sizes (a completed job kept needs no log key, nor a stack): cursors.
local k, a = starts.firstKey + 2 * v, 16 + 2 * v
-- Most runs are a first start of this worker's: their token, built once.
local firstRun = taker.token .. ':1'
-- A job that joined a parent while it ran or waited (addFlow-10.lua join) was taken as plain: once the
-- queue has had one, no run is read as plain.
local anyPlain = m == 0 or not holdOf(q).adopted
-- Whether an add ever stored a next job in this queue (keepLastIfActive: meta's `nexts`, nextJob.lua).
local anyNext = m > 0 and holdOf(q).nexts
for i = 1, m do
  local action, token = ARGV[a], firstRun
  local jobKey, lockKey, logsKey, flowKeys, nextKey = KEYS[k], KEYS[k + 1], nil, nil, nil
  -- The worker's overrides, parsed only when it sent any (a custom backoff, a worker's retention).
  local delayOverride, keepOverride, plain, encoded, flows, nextSent = nil, nil, anyPlain, false, false, false
  if #action > 1 then
    local starts, rest
    action, starts, rest = string.match(action, '^(.)(%d*)(.*)$')
    if string.sub(rest, 1, 1) == '!' then
      a = a + 1
      token = ARGV[a]
      rest = string.sub(rest, 2)
    elseif starts ~= '' then
      token = taker.token .. ':' .. starts
    end
    plain = anyPlain and string.sub(rest, 1, 1) ~= '+'
    -- Most runs that are not plain send "+" alone: the marks after it are looked for only when any came.
    if rest ~= '+' and rest ~= '' then
      encoded = string.find(rest, '$', 1, true) ~= nil
      flows = string.find(rest, '&', 1, true) ~= nil
      nextSent = string.find(rest, '^', 1, true) ~= nil
      delayOverride = tonumber(string.match(rest, '@(%d+)'))
      keepOverride = string.match(rest, '#(.*)$')
    end
  end
  local value, stack = ARGV[a + 1], ''
  if action == 'c' then
    k, a = k + 2, a + 2
  else
    logsKey = KEYS[k + 2]
    k = k + 3
    if flows then
      flowKeys = { KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3] }
      k = k + 4
    end
    if action == 'f' or action == 'F' then
      stack = ARGV[a + 2]
      a = a + 3
    else
      a = a + 2
    end
  end
  if nextSent then
    nextKey = KEYS[k]
    k = k + 1
  end
  local id = idOf(q, jobKey)
  -- Ownership is the run's token on the job: a job holds a token only while it is in flight. A lapsed
  -- lease that no sweep has recovered yet still belongs to the run; a lease held by another token never
  -- does, and needs no read here: a lease is written only with the job's token, in the same script (a
  -- take, a start's confirm, reclaim-2.lua), and a job's token becomes a run's only with its lease (a
  -- token names one run: "<worker>:<start number>"), so while the job holds this run's token its lease
  -- is this run's or gone. A finish leaves its receipt in the same field: "=<token>" when the job ended
  -- (its state and finishedOn say how and when), "=<token> <state> <ms>" when it went back in line;
  -- every other move out of `active` (a sweep's recovery, an operator's retry) clears the field. The
  -- receipt costs no field.
  -- `parentKey`: a flow's child (absent for every other job: a queue without flows pays nothing more).
  -- `deps`: a flow's parent (a plain run's, as taken, came with "&").
  -- Only what a completed run reads is read here, and of that only the token for a plain run (see ARGV):
  -- each field asked for is a scan of the hash, an absent one the whole of it. The rest when a run needs
  -- it: a flow's child's parent, a failure's, a replay's.
  local held, attemptsMade, keepOwn, deid, parentKey, deps, failing
  if action == 'f' or action == 'F' then
    -- A failure's own fields in the same read (useAttempt's `job`: attempts .. defa).
    local job = rcall('HMGET', jobKey, 'token', 'attemptsMade', 'keep', 'deid', 'parentKey', 'attempts', 'backoff', 'priority',
      'stacktrace', 'stackTraceLimit', 'keepFailed', 'defa', 'deps')
    held, attemptsMade, keepOwn, deid, parentKey, deps = job[1], job[2], job[3], job[4], job[5], job[13]
    failing = { job[6], job[7], job[8], job[9], job[10], job[11], job[12] }
  elseif plain then
    held = rcall('HGET', jobKey, 'token')
  else
    local job = rcall('HMGET', jobKey, 'token', 'attemptsMade', 'keep', 'deid', 'parentKey', 'deps')
    held, attemptsMade, keepOwn, deid, parentKey, deps = job[1], job[2], job[3], job[4], job[5], job[6]
  end
  -- deduplication's keepLastIfActive: the next job an add stored while this run held the id
  -- (lua/includes/nextJob.lua), added when the job ends for good, with its key, which the worker sends once
  -- the reply named it ("n"). Asked only in a queue where an add has stored one (meta's `nexts`).
  -- Only a run that ends its job for good asks: a completion, or a failure with no attempt left (useAttempt's
  -- rule; "F" fails whatever remains).
  local nextSpec, nextId = false, nil
  if anyNext and deid and action ~= 'r' and held == token
    and (action ~= 'f' or (tonumber(attemptsMade) or 0) + 1 >= (tonumber(failing[1]) or DEFAULT_ATTEMPTS)) then
    nextSpec = rcall('HGET', q.meta, 'dn:' .. deid)
    nextId = nextSpec and nexts().decodeNext(nextSpec)
  end
  if held ~= token then
    local receipt = held or ''
    local rest = string.sub(receipt, #token + 2)
    local done = rcall('HMGET', jobKey, 'state', 'finishedOn')
    if string.sub(receipt, 1, #token + 1) == '=' .. token and (rest == '' or string.sub(rest, 1, 1) == ' ') then
      local doneState, doneAt = done[1], tonumber(done[2]) or 0
      if rest ~= '' then
        local sep = string.find(rest, ' ', 2, true)
        doneState, doneAt = string.sub(rest, 2, sep - 1), tonumber(string.sub(rest, sep + 1))
      end
      replays, replayAt = replays + 1, doneAt
      runs[i] = doneState == 'completed' and DONE or { 'ok', doneState, '', '' }
    else
      runs[i] = { 'lost', done[1] or 'missing', '', '' }
    end
  elseif deps and not flowKeys and logsKey and action ~= 'r'
    and removedAtOnce(failing and (failing[6] or keepOverride or DEFAULT_KEEP.failed) or keepOwn or keepOverride or DEFAULT_KEEP.completed) then
    -- A parent its worker took as none (a child adopted into it since): removed now, it would leave its
    -- flow keys for good, and filed instead it would change the set's limits or outlive them. A failure
    -- with attempts left asks too (rare: the worker's second call retries it as the first would have).
    runs[i] = AGAIN
  elseif nextSpec and not (nextKey and idOf(q, nextKey) == nextId) then
    -- Named, the next job keeps its id ("*"): an add meanwhile replaces only what it holds, so the run sent
    -- again with this key finds it.
    if string.byte(nextSpec) ~= 42 then
      rcall('HSET', q.meta, 'dn:' .. deid, '*' .. nextSpec)
    end
    runs[i] = { 'next', nextId }
  else
    local parent, retried = false, false
    if parentKey then
      local p = rcall('HMGET', jobKey, 'parent', 'retried')
      parent, retried = p[1], p[2]
    end
    -- As text: Redis would format a number (a float, to Lua) again.
    local made = attemptsMade and string.format('%d', (tonumber(attemptsMade) or 0) + 1) or '1'
    gone[#gone + 1] = id
    leases[#leases + 1] = lockKey
    if action == 'c' or action == 'C' then
      -- A completed job's hash leaves out what its readers can tell (lib/redis/job-codec.ts): a first attempt
      -- (no `attemptsMade` when it had none) and a result of null (most processors return nothing). Each
      -- field a job's hash gains is a scan of it and a reallocation, some 2,500 instructions a job.
      local receipt = '=' .. token
      if attemptsMade then
        -- A retried job's completion (rarer): its fields listed, the result only when not null.
        local fields = { 'state', 'completed', 'finishedOn', nowText, 'attemptsMade', made, 'token', receipt }
        if value ~= 'null' then
          fields[9], fields[10] = 'returnValue', value
        end
        rcall('HSET', jobKey, unpack(fields))
      elseif value == 'null' then
        rcall('HSET', jobKey, 'state', 'completed', 'finishedOn', nowText, 'token', receipt)
      else
        rcall('HSET', jobKey, 'state', 'completed', 'returnValue', value, 'finishedOn', nowText, 'token', receipt)
      end
      emit(q, 'completed', 'jobId', id, 'returnvalue', value, 'prev', 'active')
      completedCount = completedCount + 1
      if nextSpec then
        -- The id passes to the next job (its hold is not released).
        nexts().addNextJob(nextKey, q, deid, nextSpec, now, nowText)
      elseif deid then
        holds[#holds + 1], holders[#holders + 1] = deid, id
      end
      local entry = parentKey and rarely().handOff(handoffsKey, id, parentKey, parent, 'completed', value, false, retried, outbox) or ''
      local keep = keepOwn or keepOverride or DEFAULT_KEEP.completed
      if not removedAtOnce(keep) then
        filed[#filed + 1] = id
        lastKeep, lastFiled = keep, i
      elseif flowKeys then
        rcall('UNLINK', jobKey, logsKey, unpack(flowKeys))
        parentsGone = parentsGone + 1
      elseif logsKey then
        rcall('UNLINK', jobKey, logsKey)
      else
        -- Removed at once, but the worker judged it kept (its own retention changed meanwhile) and sent no
        -- log key: filed under these limits, so the trim they ask for removes it with its log.
        filed[#filed + 1] = id
        lastKeep, lastFiled = keep, i
      end
      -- A completed child's outcome is its hand-off entry alone (a string; see the codes below).
      runs[i] = entry == '' and DONE or entry
    else
      -- One read and one write a run (the job's new state, the failure's record and the run's receipt
      -- together: useAttempt, enterWait); everything they read was read with the token.
      local state, backoffMs
      if action == 'r' then
        released = true
        rarely().enterWait(jobKey, q, id, nowText, true, nil, false, { 'token', '=' .. token .. ' wait ' .. nowText })
        emit(q, 'waiting', 'jobId', id, 'prev', 'active')
        state = 'wait'
      else
        state, backoffMs = rarely().useAttempt(jobKey, q, id, now, nowText, value, {
          job = failing, made = made, deid = deid, final = action == 'F', delayMs = delayOverride, roll = roll, stack = stack,
          encoded = encoded,
          receipt = '=' .. token,
        })
      end
      local trimSet, entry, oldest = '', '', false
      if state == 'failed' then
        local keepFailed = failing[6] or keepOverride or false
        if parentKey then
          local removedNow = parseKeep(keepFailed or DEFAULT_KEEP.failed) == 0
          entry = rarely().handOff(handoffsKey, id, parentKey, parent, 'failed', value, removedNow, retried) or ''
        end
        -- A parent failed by its child (failParentOnFailure): the deferred failure is spent (BullMQ's HDEL).
        if failing[7] then
          rcall('HDEL', jobKey, 'defa')
        end
        failedCount = failedCount + 1
        if nextSpec then
          -- Released by useAttempt; the next job takes the id.
          nexts().addNextJob(nextKey, q, deid, nextSpec, now, nowText)
        end
        -- Last for this run, as it may remove the job at once (retention "0"), a parent with its flow keys.
        local removed, firstIds
        trimSet, removed, firstIds = fileFinished(jobKey, logsKey, q, state, id, now, keepFailed, flowKeys)
        if removed and flowKeys then
          parentsGone = parentsGone + 1
        end
        if firstIds then
          oldest = rcall('ZRANGE', q.failed, 0, firstIds - 1)
        end
      end
      local detail = { 'ok', state, trimSet, entry, backoffMs }
      if oldest then
        -- After the backoff: false for none (a failure's), as nil would end the list.
        detail[5], detail[6] = backoffMs or false, oldest
      end
      runs[i] = detail
    end
  end
end
if #gone > 0 then
  rcall('ZREM', q.active, unpack(gone))
  rcall('ZREM', q.stalled, unpack(gone))
  rcall('DEL', unpack(leases))
end
if #filed > 0 then
  local before = rcall('ZCARD', q.completed)
  zaddMany(q.completed, scoredAt(now, filed))
  if lastKeep then
    keepLimits(q, 'completed', lastKeep)
  end
  local due, firstIds = trimDue(lastKeep and parseKeep(lastKeep), before, before + #filed)
  if due then
    local run = runs[lastFiled]
    local detail = { 'ok', 'completed', 'completed', run == DONE and '' or run }
    if firstIds then
      detail[5], detail[6] = false, rcall('ZRANGE', q.completed, 0, firstIds - 1)
    end
    runs[lastFiled] = detail
  end
end
if #holds > 0 then
  rarely().releaseDeduplications(q.meta, holds, holders)
end
if #outbox > 0 then
  rcall('HSET', handoffsKey, unpack(outbox))
end
if parentsGone > 0 then
  rarely().countOutParents(q.meta, parentsGone)
end
if completedCount > 0 then
  countFinished(metricsKey, 'completed', now, completedCount)
end
if failedCount > 0 then
  countFinished(metricsKey, 'failed', now, failedCount)
end
local taken, left, wait = takeJobs(q, taker, now, candidates)
local handed = readHand(q, taker, now, hand)
local reserved, finishedAt = nil, now
if m > 0 and replays == m and replayAt > 0 then
  -- The ids the first call reserved are those still reserved until exactly its time plus the same
  -- reservation length. Another worker's finish in the same millisecond may share that score: handing
  -- its ids here only lets this worker take them first (a take re-checks each), never twice.
  local until_ = string.format('%d', replayAt + reserveMs)
  reserved = reserve > 0 and rcall('ZRANGEBYSCORE', q.reserved, until_, until_, 'LIMIT', 0, reserve) or {}
  finishedAt = replayAt
else
  reserved = reserveNext(q, taker, reserve, now + reserveMs)
end
-- The in-flight and reserved sets change by a few members a call: kept skiplists (see skiplist.lua),
-- checked on one call in sixteen, as a conversion lasts.
if roll < 0.0625 then
  keepSkiplist(q.active)
  keepSkiplist(q.reserved)
end
local peeked = peekNext(q, peek)
local dueIn, dueAt = nextDue(q.delayed, now)
-- As BullMQ: the queue ran dry with this call (nothing taken next, nothing waiting, in flight or due
-- later, and not paused).
if #taken == 0 and #handed == 0 and not released and #gone > 0 and dueIn < 0 and listening(q) and rcall('LLEN', q.wait) == 0
  and rcall('ZCARD', q.reserved) == 0 and rcall('ZCARD', q.active) == 0 and rcall('ZCARD', q.prioritized) == 0
  and rcall('HEXISTS', q.meta, 'paused') == 0 then
  emit(q, 'drained')
end
local codes, details = {}, {}
for i = 1, m do
  local run = runs[i]
  if run == DONE then
    codes[i] = 'c'
  elseif run == AGAIN then
    codes[i] = 'p'
  elseif type(run) == 'string' then
    -- A flow's child that completed: its hand-off alone (a table a child cost Redis a conversion).
    codes[i] = 'h'
    details[#details + 1] = run
  elseif run[1] == 'next' then
    codes[i] = 'n'
    details[#details + 1] = run[2]
  elseif run[1] == 'ok' and run[3] == '' and run[4] == '' and (run[2] == 'wait' or (run[2] == 'delayed' and run[5])) then
    -- A retry (or a release) with nothing more to say: its entry was most of a failed run's reply.
    if run[2] == 'wait' then
      codes[i] = 'w'
    else
      codes[i] = 'd'
      details[#details + 1] = run[5]
    end
  else
    codes[i] = '.'
    details[#details + 1] = run
  end
end
-- An empty list goes as false (a null): Redis converts a table in a reply by looking for seven special
-- fields in it first, the largest part of a call's reply when it holds mostly empty lists.
local function listOrNull(t)
  return t[1] ~= nil and t
end
return {
  table.concat(codes), listOrNull(details), listOrNull(taken), listOrNull(reserved), listOrNull(peeked), listOrNull(left), dueIn, dueAt,
  finishedAt, wait, listOrNull(handed), confirmed, now,
}
