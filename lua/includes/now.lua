-- Milliseconds by Redis's clock: leases expire by this clock, so deadlines and marks are compared with it,
-- never with a client clock that may be skewed.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
