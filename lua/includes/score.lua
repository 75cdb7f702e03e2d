-- Scores of the sets ordered by time (`completed`, `failed` by finish time, `delayed` by due time): ms,
-- plus a sequence in the fraction for members scored in the same millisecond, so jobs that finish, fail
-- or fall due in one millisecond are listed, trimmed and promoted in the order they did so (BullMQ does
-- the same for delayed jobs). 4096 steps fit a double's precision for ms of this century; the text is
-- formatted with every digit (a number given to redis.call as is keeps only 14).
local SCORE_STEP = 1 / 4096
local function scoreAt(key, ms)
  local last = redis.call('ZREVRANGEBYSCORE', key, '(' .. tostring(ms + 1), tostring(ms), 'WITHSCORES', 'LIMIT', 0, 1)[2]
  local score = ms
  if last then
    score = math.min(tonumber(last) + SCORE_STEP, ms + 1 - SCORE_STEP)
  end
  return string.format('%.17g', score)
end
