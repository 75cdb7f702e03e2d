--[[
  Appends a line to a job's log, keeping the last `keepLogs` lines when the job was added with that option.
  From a processor, fenced by its run's token, as progress-5.lua.

  KEYS[1] job    HASH   <prefix>:{q}:<id>
  KEYS[2] lease  STRING <prefix>:{q}:<id>:lock
  KEYS[3] logs   LIST   <prefix>:{q}:<id>:logs

  ARGV[1] the run's token, or "" (not from a processor)
  ARGV[2] the line

  Returns { "ok", lines kept } or { "missing" | "lost", 0 }.
]]
local rcall = redis.call
local jobKey, lockKey, logsKey = KEYS[1], KEYS[2], KEYS[3]
local token, row = ARGV[1], ARGV[2]
-- @include owner

local status = checkOwner(jobKey, lockKey, token)
if status ~= 'ok' then
  return { status, 0 }
end
local count = rcall('RPUSH', logsKey, row)
local keep = tonumber(rcall('HGET', jobKey, 'keepLogs'))
if keep == 0 then
  rcall('DEL', logsKey)
  count = 0
elseif keep and count > keep then
  rcall('LTRIM', logsKey, -keep, -1)
  count = keep
end
return { 'ok', count }
