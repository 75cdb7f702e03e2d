-- Reservations (see takeJobs.lua reserveNext) come from `wait` or, once it is empty, from `prioritized`;
-- the score a prioritized one had is kept in `reservedScores` (id -> score) while it is reserved, so a
-- reservation handed back (a closing worker's, an expired one) goes back to where it was: a prioritized
-- job to its place among its priority, any other to the front of `wait`. `q` holds { wait, prioritized,
-- reservedScores, marker }. `ids` are next first and no longer reserved; returns how many went back.
local function putBack(q, ids)
  if #ids == 0 then
    return 0
  end
  local scored = rcall('HLEN', q.reservedScores) > 0
  for i = #ids, 1, -1 do
    local id = ids[i]
    local score = scored and rcall('HGET', q.reservedScores, id)
    if score then
      rcall('ZADD', q.prioritized, score, id)
      rcall('HDEL', q.reservedScores, id)
    else
      rcall('RPUSH', q.wait, id)
    end
  end
  rcall('ZADD', q.marker, 0, '0')
  return #ids
end
