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

-- The ZADD arguments that file `ids` at `ms` in that order, after what the set holds for `ms`: one read of
-- the set's last member (a set scored by finish time only grows at its end), whatever the number of ids.
-- The step k / 4096 is written exactly with integer formatting (k * 244140625 / 10^12): %.17g costs
-- Redis a floating-point conversion per job, several times an integer's.
local function scoredAt(key, ms, ids)
  local last = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  local k = -1
  if last and last >= ms and last < ms + 1 then
    k = math.ceil((last - ms) * 4096)
  end
  local msText = string.format('%d', ms)
  local args = {}
  for i, id in ipairs(ids) do
    k = math.min(k + 1, 4095)
    args[2 * i - 1] = k == 0 and msText or msText .. string.format('.%012d', k * 244140625)
    args[2 * i] = id
  end
  return args
end
