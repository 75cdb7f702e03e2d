-- A job scheduler's newest run's due time as text ('' for none): its hash's `last`, or, for a scheduler made
-- before `last` existed (which always had its next run made), its next period `at` (its score in
-- `schedulers`; nil when not read). Its run `repeat:<sid>:<that due>` is the scheduler's pending one, which
-- remove refuses and clean keeps, as BullMQ's.
local function lastDue(schedulerKey, at)
  return redis.call('HGET', schedulerKey, 'last') or (at and string.format('%.0f', tonumber(at)) or '')
end
