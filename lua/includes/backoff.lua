-- The wait before a retry, from a job's `backoff` field "<type>,<delay>,<maxDelay>,<jitter>" (ms, ms,
-- ms, 0..1; maxDelay 0 for none): fixed (and a custom type the worker has no strategy for) waits `delay`; exponential waits delay * 2^(n-1) before the
-- n-th retry, as BullMQ does. Jitter j draws the wait from [d * (1 - j), d] with `roll` (0..1, from the
-- client: a script's own random numbers are not random). Never longer than MAX_BACKOFF_MS, a year: the
-- longest delay `add` accepts (lib/job-options.ts), so an exponential backoff with no maxDelay stops
-- growing there.
local MAX_BACKOFF_MS = 31536000000
local function backoffDelay(spec, retry, roll)
  if spec == false or spec == nil or spec == '' then
    return 0
  end
  local kind, delay, maxDelay, jitter = string.match(spec, '^([%w_-]+),(%d+),(%d+),([%d.]+)$')
  delay, maxDelay, jitter = tonumber(delay), tonumber(maxDelay), tonumber(jitter)
  if not delay then
    return 0
  end
  local d = delay
  if kind == 'exponential' then
    d = delay * math.pow(2, math.min(retry - 1, 60))
  end
  if maxDelay > 0 then
    d = math.min(d, maxDelay)
  end
  d = math.min(d, MAX_BACKOFF_MS)
  if jitter > 0 then
    d = d * (1 - jitter) + d * jitter * roll
  end
  return math.floor(d)
end
