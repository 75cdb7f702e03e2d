-- Scores of the sets ordered by time (`failed` by finish time, `delayed` by due time): ms, plus a sequence
-- in the fraction for members scored in the same millisecond, so jobs that fail or fall due in one
-- millisecond are listed, trimmed and promoted in the order they did so (BullMQ does the same for delayed
-- jobs). `completed` is scored by scoredAt. 4096 steps fit a double's precision for ms of this century; the text is
-- formatted with every digit (a number given to redis.call as is keeps only 14).
local SCORE_STEP = 1 / 4096
local function scoreAt(key, ms)
  local last = rcall('ZREVRANGEBYSCORE', key, '(' .. string.format('%d', ms + 1), string.format('%d', ms), 'WITHSCORES', 'LIMIT', '0', '1')[2]
  local score = ms
  if last then
    score = math.min(tonumber(last) + SCORE_STEP, ms + 1 - SCORE_STEP)
  end
  return string.format('%.17g', score)
end

-- The ZADD arguments that file `ids` at `ms`, as BullMQ files a finished job: its finish time in ms, with
-- no step in the fraction (jobs that finish in one millisecond, most of a finish call's, are listed by id
-- among themselves). A fraction made each score a 25-digit number, which Redis parses on the slow path of
-- strtod, and the set's last member had to be read first: some 4,000 instructions a job.
local function scoredAt(ms, ids)
  local msText = string.format('%d', ms)
  local args = {}
  for i, id in ipairs(ids) do
    args[2 * i - 1] = msText
    args[2 * i] = id
  end
  return args
end
