--[[
  Tells parents in this queue what their children (in any queue) ended with: the second half of a flow's
  hand-off (lua/includes/handoff.lua wrote the first, in the child's queue). Idempotent: a child whose key
  is no longer among its parent's dependencies was settled already (or removed from them), and changes
  nothing, so the worker that ended the child and any number of sweeps may deliver the same entry.
  Per child, as BullMQ 6.7 does (its moveToFinished and moveChildFromDependenciesIfNeeded scripts):
    completed          -> its return value into the parent's `processed`; the last dependency moves the
                          parent on
    removed            -> dropped from the dependencies; the last moves the parent on
    failed under fpof  -> into the parent's `unsuccessful`; the parent moves on at once with its deferred
                          failure (`defa`, "child <key> failed"): the worker that takes it fails it without
                          running it (a parent of its own learns it the same way, one level at a time)
    failed under cpof  -> into the parent's `failed` (ignored failures); the parent moves on at once
    failed under idof  -> into the parent's `failed`; the last dependency moves the parent on
    failed under rdof  -> dropped; the last dependency moves the parent on
    retried            -> a failed child sent back to wait (job.retry, retryJobs): out of the parent's
                          `unsuccessful` or `failed` and back among its dependencies; the parent stays where it
                          is (BullMQ's moveChildBackToParentDependencies: one that moved on is not sent back)
  Deliveries of one child may cross (a worker delivers a run's failure while the child is retried, a sweep
  delivers an entry late): each entry has a place in the child's history, 2g for the g-th retry and 2g + 1
  for the outcome of the run after it, and once a child has been retried its parent's hash keeps the latest
  place applied ("retried <child key>"). An entry from before it is "stale" and changes nothing. A child
  never retried costs no field.
  A parent moves on only from `waiting-children` (ZREM: once, whoever delivers): to `delayed` when added
  with a delay, else to the front of `wait` or to `prioritized` (BullMQ's moveParentToWait), `waiting`
  (prev `waiting-children`) or `delayed` emitted.

  KEYS[1] waiting-children ZSET   <prefix>:{q}:waiting-children (parent id -> when it began to wait, ms)
  KEYS[2] wait             LIST   <prefix>:{q}:wait
  KEYS[3] prioritized      ZSET   <prefix>:{q}:prioritized
  KEYS[4] delayed          ZSET   <prefix>:{q}:delayed
  KEYS[5] marker           ZSET   <prefix>:{q}:marker
  KEYS[6] meta             HASH   <prefix>:{q}:meta (the priority counter, the events' cap)
  KEYS[7] events           STREAM <prefix>:{q}:events
  KEYS[8] listened         ZSET   <prefix>:{q}:listened
  KEYS[9] handoffs         HASH   <prefix>:{q}:handoffs, this queue's outbox (child id -> entry)
  KEYS[10 + 5j]            HASH   <prefix>:{q}:<id>, parent j (j = 0 .. p-1), each parent of the call once
  KEYS[11 + 5j]            SET    <prefix>:{q}:<id>:dependencies
  KEYS[12 + 5j]            HASH   <prefix>:{q}:<id>:processed
  KEYS[13 + 5j]            HASH   <prefix>:{q}:<id>:failed
  KEYS[14 + 5j]            ZSET   <prefix>:{q}:<id>:unsuccessful

  ARGV[1 + 2i], ARGV[2 + 2i] for child i (i = 0 .. n-1; ARGV[1] the first child's head; a parent's id is
  read from its key, this queue's prefix and the id): first its head,
  "<parent's number (1 .. p)><outcome><generation><sep><child>", then its return value (JSON) or failed
  reason. The outcome is one letter: c completed, r removed, t retried, or for a failure its policy: f fpof,
  p cpof, i idof, d rdof. The generation is the child's `retried` count when it ended, or the retry's (empty
  for none). After `:` comes the child's key; after `=` the child's id: a child of this queue (its key is
  this queue's prefix and the id) whose entry in this queue's outbox is delivered by this call: the entry is
  deleted here, while it is still the one delivered (same parent, outcome, value and generation: one
  rewritten meanwhile, after a retry, stays for its own delivery), so a flow within one queue needs no
  forgetHandoffs-1.lua call. (Two arguments a child, not six: a worker's settle call sends one per child it
  ended.)

  Returns one code per child, a number (a reply a few bytes per child): 1 released (its parent moved on),
  2 settled, 3 done (settled before), 4 stale (a run's outcome that a retry overtook), 5 missing (no such
  parent).
]]
local rcall = redis.call
local q = {
  waitingChildren = KEYS[1], wait = KEYS[2], prioritized = KEYS[3], delayed = KEYS[4], marker = KEYS[5], meta = KEYS[6],
  events = KEYS[7], listened = KEYS[8],
}
-- @include now
-- @include events
-- @include score
-- @include enter
-- @include handoff

local now = nowMs()

-- A parent out of waiting-children: delayed when added with a delay (not when it leaves `delayed` for a
-- failure), else at the front of the line.
local function moveOn(jobKey, id, ignoreDelay)
  local f = rcall('HMGET', jobKey, 'delay', 'priority')
  local delay = ignoreDelay and 0 or (tonumber(f[1]) or 0)
  if delay > 0 then
    enterDelayed(jobKey, q, id, now + delay)
    emit(q, 'delayed', 'jobId', id, 'delay', now + delay)
  else
    enterWait(jobKey, q, id, now, true, tonumber(f[2]) or 0)
    emit(q, 'waiting', 'jobId', id, 'prev', 'waiting-children')
  end
end

local function releaseIfWaiting(jobKey, id)
  if rcall('ZREM', q.waitingChildren, id) == 1 then
    moveOn(jobKey, id, false)
    return true
  end
  return false
end

-- Whether an entry at `place` in its child's history is not older than the latest applied (then recorded,
-- once the child has been retried: place > 1).
local function inOrder(jobKey, childKey, place)
  local field = 'retried ' .. childKey
  local latest = tonumber(rcall('HGET', jobKey, field)) or 0
  if place < latest then
    return false
  end
  if place > latest and place > 1 then
    rcall('HSET', jobKey, field, place)
  end
  return true
end

-- A delivered entry of this queue's outbox leaves it, unless it was rewritten since (another run's outcome).
local handoffsKey = KEYS[9]
local queuePrefix = string.sub(handoffsKey, 1, -9)
local function forget(childId, parentKey, outcome, value, gen, letter, genText)
  local held = rcall('HGET', handoffsKey, childId)
  if not held then
    return
  end
  local same
  if string.byte(held, 1) == 123 then
    -- "{": an entry as JSON (lua/includes/handoff.lua)
    local e = cjson.decode(held)
    same = e.parentKey == parentKey and e.outcome == outcome and e.value == value and (tonumber(e.gen) or 0) == gen
  else
    same = held == handoffEntry(letter, genText, parentKey, value)
  end
  if same then
    rcall('HDEL', handoffsKey, childId)
  end
end

local OUTCOMES = { c = 'completed', r = 'removed', t = 'retried', f = 'fpof', p = 'cpof', i = 'idof', d = 'rdof' }
local prefixLength = #queuePrefix
local out = {}
-- Whether each parent exists, read once per parent of the call.
local exists = {}
for a = 1, #ARGV - 1, 2 do
  local parentNo, letter, genText, sep, child = string.match(ARGV[a], '^(%d+)(%a)(%d*)([:=])(.*)$')
  local j = tonumber(parentNo) - 1
  local k = 10 + 5 * j
  local jobKey, depsKey, processedKey, failedKey, unsuccessfulKey = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
  local id = string.sub(jobKey, prefixLength + 1)
  local outcome, value, gen = OUTCOMES[letter], ARGV[a + 1], tonumber(genText) or 0
  local childKey, ownId = child, ''
  if sep == '=' then
    ownId = child
    childKey = queuePrefix .. child
  end
  local place = outcome == 'retried' and 2 * gen or 2 * gen + 1
  local code = 3
  if exists[j] == nil then
    exists[j] = rcall('EXISTS', jobKey) == 1
  end
  if not exists[j] then
    code = 5
  elseif outcome ~= 'removed' and not inOrder(jobKey, childKey, place) then
    code = 4
  elseif outcome == 'retried' then
    if rcall('ZREM', unsuccessfulKey, childKey) == 1 or rcall('HDEL', failedKey, childKey) == 1 then
      rcall('SADD', depsKey, childKey)
      code = 2
    end
  elseif rcall('SREM', depsKey, childKey) == 1 then
    local released = false
    code = 2
    if outcome == 'completed' then
      rcall('HSET', processedKey, childKey, value)
      released = rcall('SCARD', depsKey) == 0 and releaseIfWaiting(jobKey, id)
    elseif outcome == 'fpof' then
      rcall('ZADD', unsuccessfulKey, now, childKey)
      local reason = 'child ' .. childKey .. ' failed'
      if rcall('ZREM', q.waitingChildren, id) == 1 then
        rcall('HSET', jobKey, 'defa', reason)
        moveOn(jobKey, id, false)
        released = true
      elseif rcall('ZREM', q.delayed, id) == 1 then
        rcall('HSET', jobKey, 'defa', reason)
        moveOn(jobKey, id, true)
        released = true
      elseif rcall('HGET', jobKey, 'state') ~= 'failed' then
        rcall('HSET', jobKey, 'defa', reason)
      end
    elseif outcome == 'cpof' then
      rcall('HSET', failedKey, childKey, value)
      released = releaseIfWaiting(jobKey, id)
    else
      -- idof, rdof, removed
      if outcome == 'idof' then
        rcall('HSET', failedKey, childKey, value)
      end
      released = rcall('SCARD', depsKey) == 0 and releaseIfWaiting(jobKey, id)
    end
    if released then
      code = 1
    end
  end
  if ownId ~= '' then
    forget(ownId, jobKey, outcome, value, gen, letter, genText)
  end
  out[#out + 1] = code
end
return out
