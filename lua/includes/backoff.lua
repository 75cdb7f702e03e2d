-- The wait before a retry, from a job's `backoff` field "<type>,<delay>,<maxDelay>,<jitter>" (ms, ms,
-- ms, 0..1; maxDelay 0 for none): fixed (and a custom type the worker has no strategy for) waits `delay`; exponential waits delay * 2^(n-1) before the
-- n-th retry, as BullMQ does. Jitter j draws the wait from [d * (1 - j), d] with `roll` (0..1, from the
-- client: a script's own random numbers are not random). Never longer than MAX_BACKOFF_MS, a year: the
-- longest delay `add` accepts (lib/job-options.ts), so an exponential backoff with no maxDelay stops
-- growing there.
local MAX_BACKOFF_MS = 31536000000
-- Specs parsed in this call, by text (the jobs failing in one call mostly share theirs): a pattern match
-- and three numbers read cost some 10k instructions a job. `false` for a spec that is no backoff.
local backoffSpecs = {}
local function parsedBackoff(spec)
  local p = backoffSpecs[spec]
  if p == nil then
    local kind, delay, maxDelay, jitter = string.match(spec, '^([%w_-]+),(%d+),(%d+),([%d.]+)$')
    delay = tonumber(delay)
    p = delay and { kind == 'exponential', delay, tonumber(maxDelay), tonumber(jitter) } or false
    backoffSpecs[spec] = p
  end
  return p
end

local function backoffDelay(spec, retry, roll)
  if spec == false or spec == nil or spec == '' then
    return 0
  end
  local p = parsedBackoff(spec)
  if not p then
    return 0
  end
  local d = p[2]
  if p[1] then
    d = d * math.pow(2, math.min(retry - 1, 60))
  end
  if p[3] > 0 then
    d = math.min(d, p[3])
  end
  d = math.min(d, MAX_BACKOFF_MS)
  if p[4] > 0 then
    d = d * (1 - p[4]) + d * p[4] * roll
  end
  return math.floor(d)
end
