-- Deduplication's `keepLastIfActive` (BullMQ's): an add whose id is held by a job that is running stores
-- itself as the id's next job, the latest such add replacing the one before; when the holder ends for good
-- (completed, or failed with no attempt left), its finish adds the next job, which then holds the id. The
-- next job waits as meta's field `dn:<deid>`, "<id length>,<name length>,<data length>,<id><name><data>
-- <options>" (the options as add-7.lua takes them: "<letter><value>;..."): a replacement overwrites it, so
-- an add needs no key of the job it replaces, and only the finish that adds it needs its job's key (the
-- worker learns the id from the finish's first reply and sends the run again, finish-16.lua "n"). The add
-- that stores one sets meta's `nexts` for good: only then do a queue's finishes ask meta for the next job of
-- a job's deduplication id (one HGET a run with one). Once a finish has named the next job it is marked "*"
-- (claimed): a later add replaces what it holds but keeps its id, so the run sent again with that key always
-- finds it (adds arriving faster than a round trip cannot starve the finish). add-7.lua stores it
-- (deduplicate.lua decides), finish-16.lua adds the job. Needs the nextSpec include (decodeNext) before it.
-- The job hash's field of each option letter (add-7.lua's OPTION_FIELDS).
local NEXT_OPTION_FIELDS = {
  a = 'attempts', d = 'delay', b = 'backoff', k = 'keep', f = 'keepFailed', l = 'keepLogs', p = 'priority', o = 'lifo',
  s = 'stackTraceLimit',
}

-- Adds the next job of deduplication id `deid` (`spec` as meta kept it) as its add would have: its key is
-- `jobKey`, it is created now, waits its delay from now, and holds the id (meta's `de:<deid>`; a hold
-- without a ttl, as the option keeps). A job already under that id is left as it is (`duplicated` emitted, as
-- for an add of a taken id), and the id is free.
-- Needs the enter include (enterWait, enterDelayed) and events.
local function addNextJob(jobKey, q, deid, spec, now, nowText)
  local id, name, data, options = decodeNext(spec)
  rcall('HDEL', q.meta, 'dn:' .. deid)
  if rcall('EXISTS', jobKey) == 1 then
    rcall('HDEL', q.meta, 'de:' .. deid)
    emit(q, 'duplicated', 'jobId', id)
    return
  end
  local fields = { 'name', name, 'data', data, 'createdOn', nowText, 'deid', deid }
  local delayMs, priority, lifo = 0, 0, false
  for letter, value in string.gmatch(options, '(%a)([^;]*)') do
    fields[#fields + 1] = NEXT_OPTION_FIELDS[letter] or error('nextJob: no option ' .. letter)
    fields[#fields + 1] = value
    if letter == 'd' then
      delayMs = tonumber(value)
    elseif letter == 'p' then
      priority = tonumber(value)
    elseif letter == 'o' then
      lifo = true
    end
  end
  rcall('HSET', jobKey, unpack(fields))
  rcall('HSET', q.meta, 'de:' .. deid, id)
  emit(q, 'added', 'jobId', id, 'name', name)
  if delayMs > 0 then
    local due = string.format('%d', now + delayMs)
    enterDelayed(jobKey, q, id, due)
    emit(q, 'delayed', 'jobId', id, 'delay', due)
  else
    enterWait(jobKey, q, id, nowText, lifo, priority, true)
    emit(q, 'waiting', 'jobId', id)
  end
end
