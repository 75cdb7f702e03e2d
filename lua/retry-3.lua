--[[
  Sends failed jobs back to the back of `wait` with a fresh attempts budget, keeping their history: the
  last error moves to `lastError`, `attemptsStarted` (total runs) stays, `retried` counts the redrives.
  All or nothing: when a candidate is not in `failed`, nothing changes.

  KEYS[1] failed   ZSET  <prefix>:{q}:failed
  KEYS[2] wait     LIST  <prefix>:{q}:wait
  KEYS[3] marker   ZSET  <prefix>:{q}:marker
  KEYS[3 + i]      HASH  job i       (i = 1 .. n)

  ARGV[1] "strict": every candidate must be failed (ids named by the caller), or "any": candidates no
          longer failed (retried or removed meanwhile) are skipped
  ARGV[1 + i] job id i

  Returns { "ok", moved ids } or { "not-failed", the first id that is not in `failed`, its state or
  "missing" }.
]]
local rcall = redis.call
local q = { failed = KEYS[1], wait = KEYS[2], marker = KEYS[3] }
local strict = ARGV[1] == 'strict'
-- @include now
-- @include enter

if strict then
  for i = 1, #ARGV - 1 do
    if not rcall('ZSCORE', q.failed, ARGV[1 + i]) then
      return { 'not-failed', ARGV[1 + i], rcall('HGET', KEYS[3 + i], 'state') or 'missing' }
    end
  end
end
local now = nowMs()
local moved = {}
for i = 1, #ARGV - 1 do
  local id, jobKey = ARGV[1 + i], KEYS[3 + i]
  if rcall('ZREM', q.failed, id) == 1 then
    local reason = rcall('HGET', jobKey, 'failedReason')
    if reason then
      rcall('HSET', jobKey, 'lastError', reason)
    end
    rcall('HDEL', jobKey, 'failedReason', 'finishedOn', 'finishedAs', 'returnValue')
    rcall('HSET', jobKey, 'attemptsMade', 0)
    rcall('HINCRBY', jobKey, 'retried', 1)
    enterWait(jobKey, q, id, now, false)
    moved[#moved + 1] = id
  end
end
return { 'ok', moved }
