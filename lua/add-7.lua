--[[
  Adds jobs (one, or a bulk), each only when its id is free (an existing job is left as it is). A job
  with a delay waits in `delayed` until it is due; the others go to the back of `wait` (the front with
  lifo), or with a priority to `prioritized` (see enter.lua). One call is atomic; queue.addBulk sends its
  calls in one MULTI, so a bulk is added all or none.

  KEYS[1] wait         LIST   <prefix>:{q}:wait
  KEYS[2] delayed      ZSET   <prefix>:{q}:delayed (id -> due time, ms)
  KEYS[3] marker       ZSET   <prefix>:{q}:marker
  KEYS[4] meta         HASH   <prefix>:{q}:meta
  KEYS[5] events       STREAM <prefix>:{q}:events
  KEYS[6] listened     ZSET   <prefix>:{q}:listened
  KEYS[7] prioritized  ZSET   <prefix>:{q}:prioritized (id -> priority * 2^32 + counter)
  KEYS[7 + i]          HASH   job i (i = 1 .. n)
  With F = 13 (jobs with a deduplication, see deduplicate.lua), four keys per job instead, from KEYS[4 + 4i]:
  the job's HASH, its deduplication key STRING <prefix>:{q}:de:<id>, and the HASH and LIST (logs) of the
  id's holder the caller expects (the job's own keys when it expects none)

  ARGV[1] fields per job (F): 12, or 3 when every job of the call has the default options, or 13: the 12
    and the job's deduplication ("<ttl>,<extend>,<replace>,<holder expected>,<id>", see deduplicate.lua)
  ARGV[2 + F(i-1) .. 1 + F i], for job i:
    id; name; data (JSON text); then, when F is 12: attempts (total starts allowed); delay (ms; 0 for none); backoff
    ("<type>,<delay>,<maxDelay>,<jitter>" or "", see backoff.lua); retention in `completed` ("<count>,<ageMs>",
    "0" to remove at once, "" to keep all); retention in `failed`, the same way; keepLogs (lines; "" for all);
    priority (0: none, else 1 = highest .. 2^21 - 1); lifo ("1": to the front of `wait`, else "");
    stackTraceLimit (stack traces kept; "" for the default)
  `delay` and `lifo` are stored when given (for job.opts), not read by any script.
  A field whose value is the default (see the constants above, from lib/defaults.json) is not stored: the
  scripts read an absent field as its default, so a job with the defaults costs no byte for them.

  Returns { now (ms, Redis's clock), { 1 | 0 per job: added, or its id was taken; with F = 13 also the
  holder's id (deduplicated) or '?<holder>' (not the holder the caller expected: nothing done) } }.
  Emits `added` then `waiting` or `delayed` per job added, `duplicated` per id taken, `deduplicated`.
]]
local rcall = redis.call
local q = {
  wait = KEYS[1], delayed = KEYS[2], marker = KEYS[3], meta = KEYS[4], events = KEYS[5], listened = KEYS[6], prioritized = KEYS[7],
}
local F = tonumber(ARGV[1])
-- @include now
-- @include events
-- @include score
-- @include enter
-- @include deduplicate
-- @include jobOptions

local now = nowMs()
-- Formatted once: Lua formats a number each time it passes one to Redis.
local nowText = string.format('%d', now)
local added = {}
-- A job joined the line: the marker is told once, after the loop.
local lined = false
local short = F == 3
local D = F == 13
local per = D and 4 or 1
for i = 1, (#KEYS - 7) / per do
  local a = 1 + F * (i - 1)
  local k = 8 + per * (i - 1)
  local jobKey = KEYS[k]
  local id, name, data = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local delayMs, priority, lifo = 0, 0, false
  if not short then
    delayMs, priority, lifo = tonumber(ARGV[a + 5]), tonumber(ARGV[a + 10]), ARGV[a + 11] == '1'
  end
  local held, deid
  if rcall('EXISTS', jobKey) == 1 then
    added[i] = 0
    emit(q, 'duplicated', 'jobId', id)
  elseif D and ARGV[a + 13] ~= '' then
    held, deid = deduplicate(q, KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], id, ARGV[a + 13])
    added[i] = held
  end
  if added[i] == nil then
    added[i] = 1
    local fields = { 'name', name, 'data', data, 'createdOn', nowText }
    if not short then
      putOptions(fields, a, deid)
    end
    if delayMs > 0 then
      rcall('HSET', jobKey, unpack(fields))
      emit(q, 'added', 'jobId', id, 'name', name)
      enterDelayed(jobKey, q, id, now + delayMs)
      emit(q, 'delayed', 'jobId', id, 'delay', now + delayMs)
    else
      -- The state goes in with the job (enterWait would write it again): one HSET a job.
      fields[#fields + 1] = 'state'
      fields[#fields + 1] = priority > 0 and 'prioritized' or 'wait'
      rcall('HSET', jobKey, unpack(fields))
      emit(q, 'added', 'jobId', id, 'name', name)
      joinLine(q, id, lifo, priority)
      lined = true
      emit(q, 'waiting', 'jobId', id)
    end
  end
end
if lined then
  rcall('ZADD', q.marker, '0', '0')
end
return { now, added }
