--[[
  What the reaper needs to start worker functions for a queue: the jobs ready to run (waiting, prioritized,
  and delayed ones already due, which the next promotion moves to `wait`) and the worker-function
  invocations alive now (invocation-1.lua). A paused queue has nothing ready. The reaper's probe reads the
  same for every queue it sweeps (probe-13.lua with its backlog flag); this call is for a queue in
  WORKER_FUNCTIONS that the pass did not sweep (QUEUES or the event listed others, or its sweep failed).

  KEYS[1] wait        LIST <prefix>:{q}:wait
  KEYS[2] prioritized ZSET <prefix>:{q}:prioritized
  KEYS[3] delayed     ZSET <prefix>:{q}:delayed (id -> due time, ms)
  KEYS[4] meta        HASH <prefix>:{q}:meta (`paused`)
  KEYS[5] invocations ZSET <prefix>:{q}:invocations (invocation id -> lease end, ms)
  ARGV    none (the time is the server's, so every reaper agrees on which delayed jobs are due)

  Returns { ready, live }.
]]
local rcall = redis.call
-- @include now

local now = nowMs()
local live = rcall('ZCOUNT', KEYS[5], '(' .. now, '+inf')
if rcall('HEXISTS', KEYS[4], 'paused') == 1 then
  return { 0, live }
end
local ready = rcall('LLEN', KEYS[1]) + rcall('ZCARD', KEYS[2]) + rcall('ZCOUNT', KEYS[3], '-inf', now)
return { ready, live }
