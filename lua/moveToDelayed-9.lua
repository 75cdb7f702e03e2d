--[[
  Moves a job in flight to `delayed` until a given time (BullMQ's job.moveToDelayed(timestamp, token)): a
  processor backing off on its own terms, then throwing DelayedError. No attempt is used (BullMQ's
  skipAttempt). Fenced by the run's token: a run that lost its lease (the job was recovered, finished or
  taken by another run) changes nothing. The job leaves the lease index, its lease and any stalled mark
  (leaveActive.lua), so neither a sweep nor a heartbeat sees it again; the run's token is taken away as a
  sweep takes it ("~<token>": it keeps the start number and matches no run, so a late finish of that run,
  or of any run when the call came unfenced from a Queue's job, is refused as lost).

  KEYS[1] job       HASH   <prefix>:{q}:<id>
  KEYS[2] lease     STRING <prefix>:{q}:<id>:lock
  KEYS[3] active    ZSET   <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[4] stalled   ZSET   <prefix>:{q}:stalled
  KEYS[5] delayed   ZSET   <prefix>:{q}:delayed (id -> due time, ms)
  KEYS[6] marker    ZSET   <prefix>:{q}:marker
  KEYS[7] meta      HASH   <prefix>:{q}:meta
  KEYS[8] events    STREAM <prefix>:{q}:events
  KEYS[9] listened  ZSET   <prefix>:{q}:listened

  ARGV[1] job id
  ARGV[2] the run's token, or "" (not from a processor: any run of the job in flight)
  ARGV[3] when it is due (ms since the epoch; a time past means due now, by Redis's clock)

  Returns { "ok", due } or { "missing" }, { "lost" } (the run does not own the job), { "not-active", state }
  (it is not in flight); nothing changes then. Emits `delayed` ({ jobId, delay: due }), as BullMQ does.
]]
local rcall = redis.call
local jobKey, lockKey, activeKey, stalledKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local q = { delayed = KEYS[5], marker = KEYS[6], meta = KEYS[7], events = KEYS[8], listened = KEYS[9] }
local id, token = ARGV[1], ARGV[2]
-- @include now
-- @include events
-- @include score
-- @include enter
-- @include owner
-- @include leaveActive

local status = checkOwner(jobKey, lockKey, token)
if status ~= 'ok' then
  return { status }
end
if not rcall('ZSCORE', activeKey, id) then
  return { 'not-active', rcall('HGET', jobKey, 'state') or 'missing' }
end
local held = rcall('HGET', jobKey, 'token')
if not held or string.find('=~', string.sub(held, 1, 1), 1, true) then
  return { 'not-active', rcall('HGET', jobKey, 'state') or 'missing' }
end
local now = nowMs()
-- Whole ms, as every due time.
local due = math.floor(math.max(tonumber(ARGV[3]) or now, now))
leaveActive(lockKey, activeKey, stalledKey, id)
-- One write: the state, the token taken away, and BullMQ's job.delay, the delay left (its `delay` field;
-- EchoMQ's is the add's option, see changeDelay-6.lua).
local dueText = string.format('%d', due)
enterDelayed(jobKey, q, id, dueText, { 'token', '~' .. held, 'lastDelay', string.format('%d', due - now) })
emit(q, 'delayed', 'jobId', id, 'delay', dueText)
return { 'ok', due }
