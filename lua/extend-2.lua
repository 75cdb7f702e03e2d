--[[
  Renews a batch of leases held by one worker: the LockManager's heartbeat, one call per tick. It is the
  hottest script: the reads are one MGET, each lease costs one PEXPIREAT, and the lease index (`active`)
  is refreshed for only the first `k` leases, the ones whose recorded deadline is due (each lease every
  other tick: the LockManager alternates, and a sweep re-scores a live lease it finds with a stale
  deadline, see sweep-11.lua). Numbers reach redis.call as strings, which Redis does not reformat. A lease
  that lapsed is not judged here: it is reported back for reclaim-2.lua, which needs the job's hash.

  KEYS[1] active   ZSET  <prefix>:{q}:active (id -> lease deadline, ms)
  KEYS[2] stalled  ZSET  <prefix>:{q}:stalled
  KEYS[2 + i]      STRING lease of job i (i = 1 .. n): <prefix>:{q}:<id>:lock

  ARGV[1] lease duration (ms)
  ARGV[2] k: the first k leases also get their deadline refreshed in `active`
  ARGV[2 + i] token of lease i (i = 1 .. n)
  ARGV[2 + n + j] id of job j (j = 1 .. k): only the leases re-indexed need their id (an argument costs
          the call about as much as a renewal's PEXPIREAT)

  Returns one character per lease, in order, as one string (a reply of n integers costs Redis more than
  the renewals' reads): "1" renewed, "3" lapsed (ask reclaim-2.lua), "0" lost (held by another token).
]]
local rcall = redis.call
local LOST, RENEWED, LAPSED = '0', '1', '3'
local activeKey, stalledKey = KEYS[1], KEYS[2]
local leaseMs, k = tonumber(ARGV[1]), tonumber(ARGV[2])
local n = #KEYS - 2
-- @include now
-- @include skiplist

local deadline = string.format('%d', nowMs() + leaseMs)
-- The loop runs once per lease, so it does little besides the PEXPIREAT: KEYS and ARGV are read through
-- locals (a global is a table lookup by name each time), the index grows by a counter rather than by `#`,
-- and a code is stored only for a lease not renewed (normally none: the reply is then all RENEWED).
local keys, argv = KEYS, ARGV
local holders = rcall('MGET', unpack(keys, 3, n + 2))
local failed, index, m = {}, {}, 0
for i = 1, n do
  local holder = holders[i]
  if holder == argv[2 + i] then
    rcall('PEXPIREAT', keys[2 + i], deadline)
    if i <= k then
      index[m + 1] = deadline
      index[m + 2] = argv[2 + n + i]
      m = m + 2
    end
  elseif holder == false then
    failed[i] = LAPSED
  else
    failed[i] = LOST
  end
end
if m > 0 then
  keepSkiplist(activeKey)
  rcall('ZADD', activeKey, 'XX', unpack(index))
end
-- A renewal proves the worker alive: clear any mark from a first sweep. A sweep marks only a job whose
-- lease key is gone, and reclaim-2.lua clears the mark as it writes the lease back, so a lease found here
-- carries no mark; this stays as a guard, for the leases re-indexed (those sent with their id): each
-- lease every other renewal.
if m > 0 and rcall('ZCARD', stalledKey) > 0 then
  local ids = {}
  for j = 2, m, 2 do
    ids[#ids + 1] = index[j]
  end
  rcall('ZREM', stalledKey, unpack(ids))
end
if next(failed) == nil then
  return string.rep(RENEWED, n)
end
local codes = {}
for i = 1, n do
  codes[i] = failed[i] or RENEWED
end
return table.concat(codes)
