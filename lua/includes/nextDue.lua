-- When the earliest delayed job (a delayed add, a retry in backoff) is due: { ms from now, due time }
-- by Redis's clock, or { -1, -1 } when none is delayed. A busy worker never blocks on the marker, so
-- the calls it makes anyway (take, finish) tell it, and its promoter's timer moves the job to `wait`
-- when it falls due, however long `wait` is.
local function nextDue(delayedKey, now)
  local first = rcall('ZRANGE', delayedKey, '0', '0', 'WITHSCORES')[2]
  if not first then
    return -1, -1
  end
  return math.max(0, tonumber(first) - now), tonumber(first)
end
