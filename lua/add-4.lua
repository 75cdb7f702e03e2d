--[[
  Adds a job, or returns the existing one when its id is taken (nothing is changed then). A job with a
  delay waits in `delayed` until it is due; the others go to the back of `wait`.

  KEYS[1] job      HASH  <prefix>:{q}:<id>
  KEYS[2] wait     LIST  <prefix>:{q}:wait
  KEYS[3] delayed  ZSET  <prefix>:{q}:delayed (id -> due time, ms)
  KEYS[4] marker   ZSET  <prefix>:{q}:marker

  ARGV[1] job id
  ARGV[2] job name
  ARGV[3] data (JSON text)
  ARGV[4] attempts (total starts allowed)
  ARGV[5] delay (ms; 0 for none)
  ARGV[6] backoff: "<type>,<delay>,<maxDelay>,<jitter>" or "" (see backoff.lua)
  ARGV[7] retention in `completed`: "<count>,<ageMs>", "0" (remove at once) or "" (keep all)
  ARGV[8] retention in `failed`, the same way

  Returns { 1, now (ms, Redis's clock) } when added, { 0, 0 } when a job with that id already existed.
]]
local rcall = redis.call
local jobKey = KEYS[1]
local q = { wait = KEYS[2], delayed = KEYS[3], marker = KEYS[4] }
local id, name, data, attempts = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local delayMs, backoff, keep, keepFailed = tonumber(ARGV[5]), ARGV[6], ARGV[7], ARGV[8]
-- @include now
-- @include enter

if rcall('EXISTS', jobKey) == 1 then
  return { 0, 0 }
end
local now = nowMs()
rcall('HSET', jobKey, 'name', name, 'data', data, 'attempts', attempts, 'attemptsMade', 0, 'attemptsStarted', 0,
  'createdOn', now, 'backoff', backoff, 'keep', keep, 'keepFailed', keepFailed)
if delayMs > 0 then
  enterDelayed(jobKey, q, id, now + delayMs)
else
  enterWait(jobKey, q, id, now, false)
end
return { 1, now }
