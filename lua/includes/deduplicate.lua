-- Deduplication (BullMQ's `deduplication: { id, ttl?, extend?, replace?, reschedule? }`): who holds a deduplication id.
-- An id held with a ttl is the key <prefix>:{q}:de:<id> (the holder's job id, PX ttl): it is held until the
-- ttl passes, even after its job finished, as in BullMQ. An id held without a ttl is meta's field `de:<id>`:
-- released when its job completes or fails for good (releaseDeduplication.lua, called by the scripts
-- that end a job) or is removed; a holder whose job is gone (drained, obliterated) or finished holds
-- nothing: the next add takes the id over (BullMQ's stale-key recovery).
-- The caller names the holder it expects (the one it last saw: the holder's keys must be passed in KEYS,
-- and only then); another holder is answered '?<holder>' ('?' for none) with nothing done, and the caller
-- sends it again.
-- An add call reads the holds of all its jobs at once (readHolds: one HMGET of meta, and one MGET of the
-- keys when any of them exists), decides each job in turn against that view and what the call itself
-- changed (deduplicate), and writes the holds without a ttl to meta once, at its end (writeHolds): a
-- command per call rather than two or three a job.

-- The functions below, made only by a call that has deduplicated jobs (a call without pays for one closure,
-- not six): parseDeduplication, readHolds, deduplicate, writeHolds.
local HOLDS_NOTE = 'deduplication ids held without a ttl are the fields de:<id> (see lua/includes/deduplicate.lua)'
local function deduplication()
  -- A deduplication as the caller sends it, "<ttl ms>,<extend 0|1|2><delayed 0|1|2><n>,<holder><deduplication
  -- id>", where the holder the caller expects is its first n bytes ('' for none): either id may hold commas.
  -- `extend` 2 is keepLastIfActive (sent with a ttl of 0: its hold has none, as BullMQ's); `delayed` says
  -- what becomes of a holder still delayed: 1 replaced, 2 rescheduled, 0 kept as it is. Returns ttl (a
  -- number), extend, replace, reschedule, keepLast (booleans), the expected holder, the deduplication id.
  -- Plain finds rather than a pattern: string.match costs several times as much.
  local function parseDeduplication(spec)
    local c1 = string.find(spec, ',', 1, true)
    local extend, delayed, digit = string.byte(spec, c1 + 1, c1 + 3)
    local c2 = string.find(spec, ',', c1 + 3, true)
    -- A number of one digit (a ttl of 0, a holder's length under 10) read from its byte.
    local ttl = c1 == 2 and string.byte(spec) - 48 or tonumber(string.sub(spec, 1, c1 - 1))
    local n = c2 == c1 + 4 and digit - 48 or tonumber(string.sub(spec, c1 + 3, c2 - 1))
    local expected = n == 0 and '' or string.sub(spec, c2 + 1, c2 + n)
    return ttl, extend == 49, delayed == 49, delayed == 50, extend == 50, expected, string.sub(spec, c2 + n + 1)
  end

  -- A read, `command` on `key` (false: none) with the values in `list`, in slices (unpack's C stack holds some
  -- 8,000 values): the replies' lists joined.
  local function sliced(command, key, list)
    local out, n = {}, 0
    for i = 1, #list, 1000 do
      local last = math.min(i + 999, #list)
      local reply
      if key then
        reply = redis.call(command, key, unpack(list, i, last))
      else
        reply = redis.call(command, unpack(list, i, last))
      end
      for j = 1, #reply do
        out[n + j] = reply[j]
      end
      n = n + #reply
    end
    return out
  end

  -- The holds of a call's deduplicated jobs: `fields` their meta fields ('de:<id>', by the job's place among
  -- them), `keys` their keys (the same order), `anyKey` false when none of the keys exists (not read then).
  -- `changed` is what the call did since, by field: the holder's id, or false (released); `inMeta` holds
  -- without a ttl, `inKey` with one. `fileLines` files the jobs gathered into their lines (add-7.lua).
  local function readHolds(q, fields, keys, anyKey, fileLines)
    return {
      meta = sliced('HMGET', q.meta, fields),
      key = anyKey and sliced('MGET', false, keys) or {},
      inMeta = {},
      inKey = {},
      fileLines = fileLines,
    }
  end

  -- Holds the id of `field` for `id`: with a ttl the key (PX ttl; `keepTtl` keeps the key's remaining ttl),
  -- else meta's field (written by writeHolds).
  local function holdDeduplication(h, field, dedupKey, id, ttl, keepTtl)
    if ttl > 0 then
      if keepTtl and redis.call('PTTL', dedupKey) > 0 then
        redis.call('SET', dedupKey, id, 'KEEPTTL')
      else
        redis.call('SET', dedupKey, id, 'PX', ttl)
      end
      h.inKey[field] = id
    else
      h.inMeta[field] = id
    end
  end

  -- Job `id`, the j-th deduplicated job of the call (`field`, `dedupKey` its deduplication's; `holderKey` and
  -- `holderLogsKey` the expected holder's, nil when none is expected: not read then (its logs only with
  -- `replace`); `delayMs` the new job's delay, read only with `reschedule`; the rest as
  -- parseDeduplication gives them). Returns nil and the deduplication id when the new job now holds it (the
  -- caller adds the job and records `deid`), or the holder's id when the add is deduplicated, or
  -- '?<holder>' (expected another); with `keepLast`, a holder that is running is returned with true third:
  -- the caller stores the job as the id's next (nextJob.lua). A holder still delayed is rescheduled by
  -- `h.reschedule` (add-7.lua).
  local function deduplicate(q, h, j, field, dedupKey, holderKey, holderLogsKey, id, ttl, extend, replace, reschedule, keepLast,
                             delayMs, expected, deid)
    local inMeta = h.inMeta[field]
    if inMeta == nil then
      inMeta = h.meta[j]
    end
    local holder = inMeta
    if not inMeta then
      holder = h.inKey[field]
      if holder == nil then
        holder = h.key[j] or false
      end
    end
    if (holder or '') ~= expected then
      return '?' .. (holder or '')
    end
    if holder then
      -- A hold with a ttl lasts the ttl whatever its job does (removed by its retention too), as in BullMQ:
      -- its holder's state matters only to a replace and a keepLastIfActive.
      local state, flow
      if replace then
        local f = redis.call('HMGET', holderKey, 'state', 'parentKey', 'deps')
        state, flow = f[1], f[2] or f[3]
      elseif inMeta or keepLast then
        state = redis.call('HGET', holderKey, 'state')
      end
      local live = not inMeta or (state and state ~= 'completed' and state ~= 'failed')
      if not live then
        h.inMeta[field] = false
        holder = nil
      elseif keepLast and state == 'active' then
        -- keepLastIfActive: a running holder keeps the add as its next job, with `replace` too (BullMQ's).
        emit(q, 'deduplicated', 'jobId', holder, 'deduplicationId', deid, 'deduplicatedJobId', id)
        return holder, nil, true
      elseif replace then
        -- A job of a flow is kept, as one that left `delayed` is: removed here, a child would leave its
        -- parent waiting for it, a parent its flow keys (and its count in meta's `parents`).
        if state ~= 'delayed' or flow then
          return holder
        end
        -- Debounce: the newest add replaces a holder still waiting out its delay. The holder may be one of
        -- this call's jobs: the jobs before this one must be in their lines.
        h.fileLines()
        redis.call('ZREM', q.delayed, holder)
        redis.call('UNLINK', holderKey, holderLogsKey)
        emit(q, 'removed', 'jobId', holder, 'prev', 'delayed')
        emit(q, 'deduplicated', 'jobId', id, 'deduplicationId', deid, 'deduplicatedJobId', holder)
        if inMeta then
          h.inMeta[field] = id
        else
          holdDeduplication(h, field, dedupKey, id, ttl, not extend)
        end
        return nil, deid
      else
        if extend and ttl > 0 and not inMeta then
          redis.call('SET', dedupKey, holder, 'PX', ttl)
        end
        emit(q, 'deduplicated', 'jobId', holder, 'deduplicationId', deid, 'deduplicatedJobId', id)
        -- BullMQ's reschedule: the holder keeps its id and data, due the new add's delay from now.
        if reschedule and (state or redis.call('HGET', holderKey, 'state')) == 'delayed' then
          h.reschedule(holderKey, holder, delayMs)
        end
        return holder
      end
    end
    holdDeduplication(h, field, dedupKey, id, ttl, false)
    return nil, deid
  end

  -- Writes the holds without a ttl the call made or released: one HSET and one HDEL at most. With the
  -- holds goes meta's field `de`, whose value, longer than hash-max-listpack-value (64 bytes by default),
  -- makes meta a hash table for good: a listpack hash (up to hash-max-listpack-entries fields, 512 by default)
  -- is scanned field by field at each read and write, some 7,000 instructions a field at 500 holds, where a
  -- hash table finds one in a few hundred.
  local function writeHolds(q, h)
    local set, released = { 'de', HOLDS_NOTE }, {}
    for field, id in pairs(h.inMeta) do
      if id then
        set[#set + 1] = field
        set[#set + 1] = id
      else
        released[#released + 1] = field
      end
    end
    if #set == 2 then
      set = {}
    end
    for i = 1, #set, 1000 do
      redis.call('HSET', q.meta, unpack(set, i, math.min(i + 999, #set)))
    end
    for i = 1, #released, 1000 do
      redis.call('HDEL', q.meta, unpack(released, i, math.min(i + 999, #released)))
    end
  end

  return parseDeduplication, readHolds, deduplicate, writeHolds
end
