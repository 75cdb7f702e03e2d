-- Whether a run still owns its job: the job holds the run's token (set by the take, cleared by every move
-- out of `active`) and the lease is the run's, or has lapsed with no sweep having recovered the job yet
-- (a finish judges by the token alone, finish-16.lua: a lease is only ever written with the job's token,
-- so a job holding the run's token has the run's lease or none). `token` "" asks only whether the job exists.
-- Returns "ok", "missing" or "lost".
local function checkOwner(jobKey, lockKey, token)
  local held = redis.call('HGET', jobKey, 'token')
  if held == false and redis.call('EXISTS', jobKey) == 0 then
    return 'missing'
  end
  if token == '' then
    return 'ok'
  end
  local holder = redis.call('GET', lockKey)
  if held == token and (holder == false or holder == token) then
    return 'ok'
  end
  return 'lost'
end
