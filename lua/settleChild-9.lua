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
                          is (BullMQ's moveChildBackToParentDependencies: one that moved on is not sent back);
                          a completed child: out of `processed` and back among them while the parent is in
                          `waiting-children`, else nothing (the retry's caller refused it when it saw the
                          parent had moved on; one that moved on since keeps the result)
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

  ARGV[1] on, for each parent of the call in turn (a parent's id is read from its key, this queue's prefix
  and the id): its number j (1 .. p: its keys are KEYS[5 + 5j ..]), how many of its children follow, then two
  arguments per child: its head, "<outcome><generation><sep><child>", and its return value (JSON) or failed
  reason. The outcome is one letter: c completed, r removed, t retried, or for a failure its policy: f fpof,
  p cpof, i idof, d rdof. The generation is the child's `retried` count when it ended, or the retry's (empty
  for none). After `:` comes the child's key; after `=` the child's id: a child of this queue (its key is
  this queue's prefix and the id) whose entry in this queue's outbox is delivered by this call: the entry is
  deleted here, while it is still the one delivered (same parent, outcome, value and generation: one
  rewritten meanwhile, after a retry, stays for its own delivery), so a flow within one queue needs no
  forgetHandoffs-1.lua call. A parent's children in one call are distinct (lib/redis/flows.ts sends a child
  named twice in another call). A worker's finish ends children of a few parents at once: each parent is
  read once for all of them (its fields, and their dependencies with SMISMEMBER), and its completed
  children's writes go in one SREM and one HSET (a child's own reads and writes only for the other
  outcomes, rare).

  Returns a string of one digit per child, in ARGV order: 1 released (its parent moved on), 2 settled, 3
  done (settled before), 4 stale (a run's outcome that a retry overtook), 5 missing (no such parent).
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

-- What a parent of the call holds, read once before its children: its delay and priority (moveOn),
-- whether it exists, the `retried` places of the call's children (inOrder) and which of them are still
-- among its dependencies. A completed child's writes (SREM, its return value into `processed`) wait in the
-- parent's record and go in one command each after its children; its dependencies are counted once, when
-- the call's last pending child of it leaves. Any other outcome first writes what waits and then reads and
-- writes one child at a time (`direct`), as rare as retries and failures under a policy.
local OUTCOMES = { c = 'completed', r = 'removed', t = 'retried', f = 'fpof', p = 'cpof', i = 'idof', d = 'rdof' }
local handoffsKey = KEYS[9]
local queuePrefix = string.sub(handoffsKey, 1, -9)
local prefixLength = #queuePrefix

-- A parent out of waiting-children: delayed when added with a delay (not when it leaves `delayed` for a
-- failure), else at the front of the line.
local function moveOn(P, ignoreDelay)
  local delay = ignoreDelay and 0 or (tonumber(P.delay) or 0)
  if delay > 0 then
    enterDelayed(P.jobKey, q, P.id, now + delay)
    emit(q, 'delayed', 'jobId', P.id, 'delay', now + delay)
  else
    enterWait(P.jobKey, q, P.id, now, true, tonumber(P.priority) or 0)
    emit(q, 'waiting', 'jobId', P.id, 'prev', 'waiting-children')
  end
end

local function releaseIfWaiting(P)
  if rcall('ZREM', q.waitingChildren, P.id) == 1 then
    moveOn(P, false)
    return true
  end
  return false
end

-- The call's parents, each with its children in the call (a child's place among them is its slot) and
-- where they are in ARGV; this queue's children's ids whose outbox entries the call delivers. A parent's
-- record is built whole (its fields presized): a Lua table grown key by key rehashes as it grows, so a
-- child adds as few keys as it can (the replies of HMGET and SMISMEMBER hold its state by slot), and its
-- head is read with string.byte and string.sub (a string.match costs several times more) but for a
-- generation.
local sbyte, ssub, argv = string.byte, string.sub, ARGV
-- A child's code as a digit (a number would be formatted as text by table.concat, each apart).
local CODES = { '1', '2', '3', '4', '5' }
local SEP_OWN, SEP_KEY = 61, 58 -- "=", ":"
local own = {}
local groups = {}
do
  local a = 1
  while a < #argv do
    local j, count = tonumber(argv[a]), tonumber(argv[a + 1])
    local k = 5 + 5 * j
    local jobKey = KEYS[k]
    local P = {
      jobKey = jobKey, depsKey = KEYS[k + 1], processedKey = KEYS[k + 2], failedKey = KEYS[k + 3], unsuccessfulKey = KEYS[k + 4],
      id = ssub(jobKey, prefixLength + 1), children = {}, fields = { 'createdOn', 'delay', 'priority' }, at = a + 2, count = count,
      exists = false, direct = false, delay = false, priority = false, latest = false, member = false, left = 0, removed = 0,
      placed = false,
    }
    groups[#groups + 1] = P
    local children, fields = P.children, P.fields
    for slot = 1, count do
      local head = argv[a + 2 * slot]
      local sep = sbyte(head, 2)
      local childKey
      if sep ~= SEP_OWN and sep ~= SEP_KEY then
        local _, rest
        _, _, sep, rest = string.match(head, '^(%a)(%d*)([:=])(.*)$')
        sep = sbyte(sep)
        head = '..' .. rest
      end
      if sep == SEP_OWN then
        local id = ssub(head, 3)
        own[#own + 1] = id
        childKey = queuePrefix .. id
      else
        childKey = ssub(head, 3)
      end
      children[slot] = childKey
      fields[3 + slot] = 'retried ' .. childKey
    end
    a = a + 2 + 2 * count
  end
end

-- A parent's one read: `createdOn` (every job's) says it exists without an EXISTS; its children's
-- `retried` places; then which of them are among its dependencies (1, 2 once removed here).
local function loadParent(P)
  local f = rcall('HMGET', P.jobKey, unpack(P.fields))
  P.latest = f
  P.exists = f[1] ~= false or rcall('EXISTS', P.jobKey) == 1
  if not P.exists then
    P.member = {}
    return
  end
  P.delay, P.priority = f[2], f[3]
  P.member = rcall('SMISMEMBER', P.depsKey, unpack(P.children))
  for _, m in ipairs(P.member) do
    P.left = P.left + m
  end
end

-- The completed children's writes that wait (before a direct step, and at the end).
local function flush(P)
  if P.removed == 0 then
    return
  end
  local children, member, all = P.children, P.member, P.removed == P.count
  local removed, values = children, {}
  if not all then
    removed = {}
  end
  for slot = 1, P.count do
    if member[slot] == 2 then
      local childKey = children[slot]
      if not all then
        removed[#removed + 1] = childKey
      end
      values[#values + 1] = childKey
      values[#values + 1] = argv[P.at + 2 * slot - 1]
      member[slot] = 0
    end
  end
  P.removed = 0
  rcall('SREM', P.depsKey, unpack(removed))
  rcall('HSET', P.processedKey, unpack(values))
end

-- Whether an entry at `place` in its child's history is not older than the latest applied (then recorded,
-- once the child has been retried: place > 1; written at the end, nothing here reads it but this).
local function inOrder(P, slot, place)
  local latest = P.latest[3 + slot]
  latest = latest and tonumber(latest) or 0
  if place < latest then
    return false
  end
  if place > latest and place > 1 then
    P.latest[3 + slot] = place
    P.placed = P.placed or {}
    P.placed[#P.placed + 1] = 'retried ' .. P.children[slot]
    P.placed[#P.placed + 1] = place
  end
  return true
end

-- Outcomes other than completed, one child at a time with its own reads (the parent's writes that waited
-- went first). Returns the child's code.
local function settleDirect(P, childKey, outcome, value)
  if outcome == 'retried' then
    if rcall('ZREM', P.unsuccessfulKey, childKey) == 1 or rcall('HDEL', P.failedKey, childKey) == 1 then
      rcall('SADD', P.depsKey, childKey)
      return 2
    end
    -- A completed child: only a parent still waiting for children waits for it again. One that moved on ran,
    -- or runs, with its result, and keeps it: a dependency added now would be one it never waits for.
    if rcall('ZSCORE', q.waitingChildren, P.id) and rcall('HDEL', P.processedKey, childKey) == 1 then
      rcall('SADD', P.depsKey, childKey)
      return 2
    end
    return 3
  end
  if rcall('SREM', P.depsKey, childKey) == 0 then
    return 3
  end
  local released = false
  if outcome == 'completed' then
    rcall('HSET', P.processedKey, childKey, value)
    released = rcall('SCARD', P.depsKey) == 0 and releaseIfWaiting(P)
  elseif outcome == 'fpof' then
    rcall('ZADD', P.unsuccessfulKey, now, childKey)
    local reason = 'child ' .. childKey .. ' failed'
    if rcall('ZREM', q.waitingChildren, P.id) == 1 then
      rcall('HSET', P.jobKey, 'defa', reason)
      moveOn(P, false)
      released = true
    elseif rcall('ZREM', q.delayed, P.id) == 1 then
      rcall('HSET', P.jobKey, 'defa', reason)
      moveOn(P, true)
      released = true
    elseif rcall('HGET', P.jobKey, 'state') ~= 'failed' then
      rcall('HSET', P.jobKey, 'defa', reason)
    end
  elseif outcome == 'cpof' then
    rcall('HSET', P.failedKey, childKey, value)
    released = releaseIfWaiting(P)
  else
    -- idof, rdof, removed
    if outcome == 'idof' then
      rcall('HSET', P.failedKey, childKey, value)
    end
    released = rcall('SCARD', P.depsKey) == 0 and releaseIfWaiting(P)
  end
  return released and 1 or 2
end

-- A completed child of a parent read at once: its writes wait; once the call's last pending child of the
-- parent leaves, they go, and the parent's dependencies are counted.
local function settleCompleted(P, slot)
  if P.member[slot] ~= 1 then
    return 3
  end
  P.member[slot] = 2
  P.removed = P.removed + 1
  P.left = P.left - 1
  if P.left == 0 then
    flush(P)
    if rcall('SCARD', P.depsKey) == 0 and releaseIfWaiting(P) then
      return 1
    end
  end
  return 2
end

-- This queue's outbox entries delivered here, read at once (nothing here writes them).
local held = #own > 0 and rcall('HMGET', handoffsKey, unpack(own)) or {}
local gone = {}
local ownAt = 0
local out = {}
local i = 0
local COMPLETED = sbyte('c')
for _, P in ipairs(groups) do
  loadParent(P)
  -- A completed child's entry, generation 0, as handoff.lua writes it: this head and its value.
  local entryHead = 'c\n' .. P.jobKey .. '\n'
  local member, latest = P.member, P.latest
  for slot = 1, P.count do
    local head, value = argv[P.at + 2 * slot - 2], argv[P.at + 2 * slot - 1]
    local b1, sep = sbyte(head, 1, 2)
    local code
    local simple = sep == SEP_OWN or sep == SEP_KEY
    if simple and b1 == COMPLETED and P.exists and not P.direct and not latest[3 + slot] then
      -- The common case: completed, never retried (place 1, nothing to record), settled with the parent's
      -- writes that wait (settleCompleted, inline).
      if member[slot] ~= 1 then
        code = 3
      else
        member[slot] = 2
        P.removed = P.removed + 1
        P.left = P.left - 1
        code = 2
        if P.left == 0 then
          flush(P)
          if rcall('SCARD', P.depsKey) == 0 and releaseIfWaiting(P) then
            code = 1
          end
        end
      end
      if sep == SEP_OWN then
        ownAt = ownAt + 1
        local h = held[ownAt]
        if h and h == entryHead .. value then
          gone[#gone + 1] = own[ownAt]
        elseif h and sbyte(h, 1) == 123 then
          local e = cjson.decode(h)
          if e.parentKey == P.jobKey and e.outcome == 'completed' and e.value == value and (tonumber(e.gen) or 0) == 0 then
            gone[#gone + 1] = own[ownAt]
          end
        end
      end
    else
      local letter, genText = ssub(head, 1, 1), ''
      if not simple then
        local sepText
        letter, genText, sepText = string.match(head, '^(%a)(%d*)([:=])')
        sep = sbyte(sepText)
      end
      local outcome, gen = OUTCOMES[letter], genText == '' and 0 or tonumber(genText)
      if not P.exists then
        code = 5
      elseif outcome ~= 'removed' and not inOrder(P, slot, outcome == 'retried' and 2 * gen or 2 * gen + 1) then
        code = 4
      elseif outcome == 'completed' and not P.direct then
        code = settleCompleted(P, slot)
      else
        if not P.direct then
          flush(P)
          P.direct = true
        end
        code = settleDirect(P, P.children[slot], outcome, value)
      end
      if sep == SEP_OWN then
        -- Delivered: it leaves the outbox unless it was rewritten since (another run's outcome).
        ownAt = ownAt + 1
        local h = held[ownAt]
        if h then
          local same
          if sbyte(h, 1) == 123 then
            -- "{": an entry as JSON (lua/includes/handoff.lua)
            local e = cjson.decode(h)
            same = e.parentKey == P.jobKey and e.outcome == outcome and e.value == value and (tonumber(e.gen) or 0) == gen
          else
            same = h == handoffEntry(letter, genText, P.jobKey, value)
          end
          if same then
            gone[#gone + 1] = own[ownAt]
          end
        end
      end
    end
    i = i + 1
    out[i] = CODES[code]
  end
  if P.exists then
    flush(P)
    if P.placed then
      rcall('HSET', P.jobKey, unpack(P.placed))
    end
  end
end
if #gone > 0 then
  rcall('HDEL', handoffsKey, unpack(gone))
end
return table.concat(out)
