-- Deduplication (BullMQ's `deduplication: { id, ttl?, extend?, replace? }`): who holds a deduplication id.
-- An id held with a ttl is the key <prefix>:{q}:de:<id> (the holder's job id, PX ttl): it is held until the
-- ttl passes, even after its job finished, as in BullMQ. An id held without a ttl is meta's field `de:<id>`:
-- released when its job completes or fails for good (releaseDeduplication.lua, called by the scripts
-- that end a job) or is removed; a holder whose job is gone (drained, obliterated) or finished holds
-- nothing: the next add takes the id over (BullMQ's stale-key recovery).
-- The caller names the holder it expects (the one it last saw: the holder's keys must be passed in KEYS,
-- and only then); another holder is answered '?<holder>' ('?' for none) with nothing done, and the caller
-- sends it again.

-- A deduplication as the caller sends it, "<ttl ms>,<extend 1|0>,<replace 1|0>,<n>,<holder><deduplication
-- id>", where the holder the caller expects is its first n bytes ('' for none): either id may hold commas.
-- Returns ttl, extend, replace (text), the expected holder, the deduplication id.
local function parseDeduplication(spec)
  local ttl, extend, replace, n, rest = string.match(spec, '^(%d+),(%d),(%d),(%d+),(.*)$')
  n = tonumber(n)
  return ttl, extend, replace, string.sub(rest, 1, n), string.sub(rest, n + 1)
end

-- The holder a deduplication expects ('' for none).
local function expectedHolder(spec)
  local _, _, _, expected = parseDeduplication(spec)
  return expected
end

-- Holds `deid` for `id`: with a ttl the key (PX ttl; `keepTtl` keeps the key's remaining ttl), else meta's field.
local function holdDeduplication(q, dedupKey, deid, id, ttl, keepTtl)
  if ttl > 0 then
    if keepTtl and redis.call('PTTL', dedupKey) > 0 then
      redis.call('SET', dedupKey, id, 'KEEPTTL')
    else
      redis.call('SET', dedupKey, id, 'PX', ttl)
    end
  else
    redis.call('HSET', q.meta, 'de:' .. deid, id)
  end
end

-- `spec` is as expectedHolder reads it; `holderKey` and `holderLogsKey` are the expected holder's (nil when none
-- is expected: they are not read then). Returns nil and the deduplication id when the new job `id` now
-- holds it (the caller adds the job and records `deid`), or the holder's id when the add is deduplicated,
-- or '?<holder>' (expected another).
local function deduplicate(q, dedupKey, holderKey, holderLogsKey, id, spec)
  local ttl, extend, replace, expected, deid = parseDeduplication(spec)
  ttl = tonumber(ttl)
  local field = 'de:' .. deid
  local inMeta = redis.call('HGET', q.meta, field)
  local holder = inMeta or redis.call('GET', dedupKey)
  if (holder or '') ~= expected then
    return '?' .. (holder or '')
  end
  if holder then
    local state = redis.call('HGET', holderKey, 'state')
    -- A hold with a ttl lasts the ttl whatever its job does (removed by its retention too), as in BullMQ.
    local live = not inMeta or (state and state ~= 'completed' and state ~= 'failed')
    if not live then
      if inMeta then
        redis.call('HDEL', q.meta, field)
      else
        redis.call('DEL', dedupKey)
      end
      holder = nil
    elseif replace == '1' then
      if state ~= 'delayed' then
        return holder
      end
      -- Debounce: the newest add replaces a holder still waiting out its delay.
      redis.call('ZREM', q.delayed, holder)
      redis.call('UNLINK', holderKey, holderLogsKey)
      emit(q, 'removed', 'jobId', holder, 'prev', 'delayed')
      emit(q, 'deduplicated', 'jobId', id, 'deduplicationId', deid, 'deduplicatedJobId', holder)
      if inMeta then
        redis.call('HSET', q.meta, field, id)
      else
        holdDeduplication(q, dedupKey, deid, id, ttl, extend ~= '1')
      end
      return nil, deid
    else
      if extend == '1' and ttl > 0 and not inMeta then
        redis.call('SET', dedupKey, holder, 'PX', ttl)
      end
      emit(q, 'deduplicated', 'jobId', holder, 'deduplicationId', deid, 'deduplicatedJobId', id)
      return holder
    end
  end
  holdDeduplication(q, dedupKey, deid, id, ttl, false)
  return nil, deid
end
