--[[
  Adds the nodes of a flow that belong to one queue (FlowProducer.add, lib/flows/producer.ts): a parent
  waits in `waiting-children` with its `dependencies` already holding the keys of all its children, and is
  written before any of them (the producer writes a tree top-down, a level at a time), so no child can end
  before its parent's record exists and no parent runs early. A child holds `parentKey` and `parent`
  (BullMQ's fields: { id, queueKey } and the failure policy: fpof, cpof, idof or rdof). A leaf goes to
  `wait`, `prioritized` or `delayed` as add-7.lua's jobs do. One call is atomic; the producer sends the
  calls of one queue and level in one MULTI.
  A node whose id exists is left as it is (a parent still in `waiting-children` also waits for the new
  children), but joins its new parent (BullMQ's flows do the same): it
  takes `parentKey` and `parent`, and one that already completed (or failed, under a failure policy)
  hands its outcome off at once (lua/includes/handoff.lua); one with another parent is refused (code -7,
  BullMQ's ParentJobCannotBeReplaced), and the producer drops it from its parent.

  KEYS[1] wait              LIST   <prefix>:{q}:wait
  KEYS[2] delayed           ZSET   <prefix>:{q}:delayed
  KEYS[3] marker            ZSET   <prefix>:{q}:marker
  KEYS[4] meta              HASH   <prefix>:{q}:meta (`parents`, its jobs that hold flow keys: trim-2.lua;
                                   `adopted` once an unfinished job joined a parent: finish-16.lua)
  KEYS[5] events            STREAM <prefix>:{q}:events
  KEYS[6] listened          ZSET   <prefix>:{q}:listened
  KEYS[7] prioritized       ZSET   <prefix>:{q}:prioritized
  KEYS[8] waiting-children  ZSET   <prefix>:{q}:waiting-children
  KEYS[9] handoffs          HASH   <prefix>:{q}:handoffs
  KEYS[10] adding           ZSET   <prefix>:{q}:adding (a parent -> when its add began, until the producer
                                   wrote all its children: lib/flows/adding.ts)
  KEYS[11..]                       per node, in order: HASH <prefix>:{q}:<id> (a parent's holds `deps`: it
                                   has flow keys, trim-2.lua), then for a parent (a node with children)
                                   SET <prefix>:{q}:<id>:dependencies, its children's keys

  ARGV[1] t, the number of distinct option sets; ARGV[2] p, the number of distinct parents
  ARGV[3 .. 2 + 9t] the option sets, nine values each: attempts; delay (ms); backoff; retention in
    `completed`; retention in `failed`; keepLogs; priority; lifo; stackTraceLimit (all as add-7.lua takes them)
  ARGV[3 + 9t .. 2 + 9t + 2p] the parents, two values each: parentKey; parent (BullMQ's field, JSON)
  Then four for each node (its id is read from its key, this queue's prefix and the id): name; data (JSON
    text); "<its option set (1 .. t)>.<its parent (1 .. p, 0 for a root)>"; its children, one a line ("" for
    a leaf): first the ids of those of this queue (their keys are this queue's prefix and the id), then, after
    an empty line, the keys of those of other queues
  (Nodes of one call mostly share their options and, a parent's children, their parent: each goes once.)

  Returns { now (ms), { per node: 1 added, 0 existed (joined its parent), -7 it has another parent },
  { id, entry, ... } the hand-offs written (the producer delivers them at once, as a finish's worker does,
  so a parent added again over its ended child moves on now; a sweep delivers them if it stops first) }.
  Emits `added` then `waiting-children` (a parent), `waiting` or `delayed` per node added, `duplicated`.
]]
local rcall = redis.call
local q = {
  wait = KEYS[1], delayed = KEYS[2], marker = KEYS[3], meta = KEYS[4], events = KEYS[5], listened = KEYS[6], prioritized = KEYS[7],
  waitingChildren = KEYS[8],
}
local handoffsKey, addingKey = KEYS[9], KEYS[10]
local F = 4
-- This queue's key prefix (`<prefix>:{q}:`): a job's key is it and the id.
local queuePrefix = string.sub(KEYS[1], 1, -5)
local prefixLength = #queuePrefix
local optionSets, parentCount = tonumber(ARGV[1]), tonumber(ARGV[2])
local optionsAt, parentsAt = 3, 3 + 9 * optionSets
local nodesAt = parentsAt + 2 * parentCount
-- @include now
-- @include events
-- @include score
-- @include enter
-- @include jobOptions
-- @include handoff

local now = nowMs()
local nowText = string.format('%d', now)
-- The hand-offs written here (an existing job that ended joined its parent): the producer delivers them.
local handoffs = {}

-- An existing job joins its new parent (BullMQ's updateExistingJobsParent); one that already ended hands
-- its outcome off now, as its end would have.
local function join(jobKey, id, parentKey, parent)
  if parentKey == '' then
    return 0
  end
  local f = rcall('HMGET', jobKey, 'parentKey', 'state', 'returnValue', 'failedReason', 'retried')
  if f[1] and f[1] ~= parentKey then
    return -7
  end
  rcall('HSET', jobKey, 'parentKey', parentKey, 'parent', parent)
  if not f[1] and f[2] ~= 'completed' and f[2] ~= 'failed' then
    -- It may be running, or in a worker's hand, taken as a job with no parent: its finish would read only
    -- its token (finish-16.lua's plain runs). meta's `adopted` makes every finish of the queue read all.
    rcall('HSET', q.meta, 'adopted', '1')
  end
  local entry = false
  if f[2] == 'completed' then
    entry = handOff(handoffsKey, id, parentKey, parent, 'completed', f[3] or 'null', false, f[5])
  elseif f[2] == 'failed' then
    entry = handOff(handoffsKey, id, parentKey, parent, 'failed', f[4] or '', false, f[5])
  end
  if entry then
    handoffs[#handoffs + 1] = id
    handoffs[#handoffs + 1] = entry
  end
  return 0
end

-- A parent's children's keys, in batches (unpack's limit is about 8,000 values).
local function addDependencies(depsKey, children)
  local batch = {}
  -- Ids of this queue's children, then (after an empty line) other queues' keys: ids and keys are never empty.
  local own = true
  for line in string.gmatch(children, '([^\n]*)\n?') do
    if line == '' then
      own = false
    else
      batch[#batch + 1] = own and queuePrefix .. line or line
      if #batch == 1000 then
        rcall('SADD', depsKey, unpack(batch))
        batch = {}
      end
    end
  end
  if #batch > 0 then
    rcall('SADD', depsKey, unpack(batch))
  end
end

-- Leaves bound for `wait` (at its back, or its front for lifo), and parents for `waiting-children` and
-- `adding`: each set written once at the end of the call, as add-7.lua does (the order within each is the
-- nodes' order: the same lists one command per node would make).
local back, front, waiting = {}, {}, {}
local lined = false
local function each(command, key, values)
  for i = 1, #values, 1000 do
    rcall(command, key, unpack(values, i, math.min(i + 999, #values)))
  end
end

-- The nodes' job keys (KEYS[11..], a parent's followed by its dependencies' key) and whether any exists
-- already: one EXISTS for the call (a fresh flow's nodes do not), then one a node only when one does.
-- A call's nodes are distinct jobs (the producer refuses a jobId used twice: lib/flows/tree.ts).
local jobKeys = {}
do
  local k = 11
  for a = nodesAt, #ARGV - 1, F do
    jobKeys[#jobKeys + 1] = KEYS[k]
    k = k + (ARGV[a + 3] ~= '' and 2 or 1)
  end
end
local anyExisted = false
for i = 1, #jobKeys, 1000 do
  if rcall('EXISTS', unpack(jobKeys, i, math.min(i + 999, #jobKeys))) > 0 then
    anyExisted = true
    break
  end
end
-- Each option set read once for the call (its stored fields, delay, priority, lifo), not once a node: a
-- tonumber costs a strtod. putOptions reads ARGV[o + 4 .. o + 12]: the set's nine values.
local sets = {}
for t = 1, optionSets do
  local o = optionsAt + 9 * (t - 1) - 4
  local stored = {}
  putOptions(stored, o)
  sets[t] = { stored = stored, delayMs = tonumber(ARGV[o + 5]), priority = tonumber(ARGV[o + 10]), lifo = ARGV[o + 11] == '1' }
end
-- A node's "<option set>.<parent>", read once per distinct text (a parent's children share theirs).
local specs = {}
-- The jobs whose `deps` this call sets first: they now hold flow keys, and meta's `parents` counts them
-- (trim-2.lua looks for parents only while it is above 0; a flow's children have none, and a queue
-- without parents sends none), in one HINCRBY for the call.
local newParents = 0

local codes = {}
local k = 11
for a = nodesAt, #ARGV - 1, F do
  local name, data, children = ARGV[a], ARGV[a + 1], ARGV[a + 3]
  local spec = specs[ARGV[a + 2]]
  if not spec then
    local optionSet, parentAt = string.match(ARGV[a + 2], '^(%d+)%.(%d+)$')
    parentAt = tonumber(parentAt)
    spec = { set = sets[tonumber(optionSet)], parentKey = '', parent = '' }
    if parentAt > 0 then
      spec.parentKey, spec.parent = ARGV[parentsAt + 2 * parentAt - 2], ARGV[parentsAt + 2 * parentAt - 1]
    end
    specs[ARGV[a + 2]] = spec
  end
  local set, parentKey, parent = spec.set, spec.parentKey, spec.parent
  local jobKey, depsKey = KEYS[k], false
  local id = string.sub(jobKey, prefixLength + 1)
  k = k + 1
  if children ~= '' then
    depsKey = KEYS[k]
    k = k + 1
  end
  if anyExisted and rcall('EXISTS', jobKey) == 1 then
    codes[#codes + 1] = join(jobKey, id, parentKey, parent)
    -- An existing parent still waiting for its children waits for the new ones too (BullMQ adds them to its
    -- dependencies): else they would end unheard. One that runs or ended is not sent back to wait.
    if children ~= '' and rcall('HGET', jobKey, 'state') == 'waiting-children' then
      newParents = newParents + rcall('HSET', jobKey, 'deps', '1')
      addDependencies(depsKey, children)
    end
    emit(q, 'duplicated', 'jobId', id)
  else
    codes[#codes + 1] = 1
    local fields = { 'name', name, 'data', data, 'createdOn', nowText }
    for _, v in ipairs(set.stored) do
      fields[#fields + 1] = v
    end
    if parentKey ~= '' then
      fields[#fields + 1] = 'parentKey'
      fields[#fields + 1] = parentKey
      fields[#fields + 1] = 'parent'
      fields[#fields + 1] = parent
    end
    local delayMs, priority = set.delayMs, set.priority
    if children ~= '' then
      fields[#fields + 1] = 'deps'
      fields[#fields + 1] = '1'
      fields[#fields + 1] = 'state'
      fields[#fields + 1] = 'waiting-children'
    elseif delayMs <= 0 then
      -- The state goes in with the job (enterWait would write it again).
      fields[#fields + 1] = 'state'
      fields[#fields + 1] = priority > 0 and 'prioritized' or 'wait'
    end
    rcall('HSET', jobKey, unpack(fields))
    emit(q, 'added', 'jobId', id, 'name', name)
    if children ~= '' then
      newParents = newParents + 1
      addDependencies(depsKey, children)
      waiting[#waiting + 1] = id
      emit(q, 'waiting-children', 'jobId', id)
    elseif delayMs > 0 then
      enterDelayed(jobKey, q, id, now + delayMs)
      emit(q, 'delayed', 'jobId', id, 'delay', now + delayMs)
    else
      local lifo = set.lifo
      if priority > 0 then
        joinLine(q, id, lifo, priority)
      elseif lifo then
        front[#front + 1] = id
      else
        back[#back + 1] = id
      end
      lined = true
      emit(q, 'waiting', 'jobId', id)
    end
  end
end
each('LPUSH', q.wait, back)
each('RPUSH', q.wait, front)
if #waiting > 0 then
  local args = scoredAt(now, waiting)
  each('ZADD', q.waitingChildren, args)
  each('ZADD', addingKey, args)
end
if lined then
  rcall('ZADD', q.marker, '0', '0')
end
if newParents > 0 then
  rcall('HINCRBY', q.meta, 'parents', newParents)
end
return { now, codes, handoffs }
