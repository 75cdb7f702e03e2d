-- Spends one attempt of a run that failed and has left `active`. While attempts remain and the error is not
-- final (`run.final`: the processor threw an UnrecoverableError), the job goes back to the back of `wait`,
-- or to `delayed` for its backoff (`run.delayMs`, the worker's strategy, else the job's `backoff`: see
-- backoff.lua; kept in `lastDelay` while it waits); else to `failed` with `reason`, counted in meta's
-- `failedNew` for the reaper's alarm, its deduplication id released. Emits as BullMQ does: `waiting` or
-- `delayed` for a retry; for a final failure `failed`, then `retries-exhausted` when it used the last
-- attempt. `q` holds the queue's keys { wait, prioritized, delayed, marker, meta, events, listened }.
-- What the failure changes in the job is one HSET, with the run's receipt (`run.receipt`, the token field
-- a finish leaves: followed by the state and `nowText` for a retry): the attempt made (`run.made`, text:
-- the run's attemptsMade), the reason (failedReason; a retried one's is lastError too, kept past an
-- operator's retry, which clears failedReason; a job that never fails has neither), the stack.
-- `run.job` is what the caller read of the job, in one HMGET: FAILING_FIELDS. `run.stack` is the run's stack,
-- or with `run.encoded` the job's new stacktrace already built by the worker ("" for no change). `run.deid`: its
-- deduplication id (nil for none). Returns the new state, and a retry's wait in `delayed` (ms); a failed
-- job is filed under `failed` by the caller, with its retention (fileFinished, retention.lua). Needs the
-- releaseDeduplication, backoff and enter includes.
-- The fields read for a failed run, in the order of `run.job` (the caller's HMGET names them as literals).
-- attempts, backoff, priority, stacktrace, stackTraceLimit, keepFailed, defa
local F_ATTEMPTS, F_BACKOFF, F_PRIORITY, F_STACKS, F_STACK_LIMIT = 1, 2, 3, 4, 5

-- The stacks of a job's failed runs, BullMQ's `stacktrace`: a JSON array, oldest first, of at most the
-- job's stackTraceLimit newest (0: none kept). Nil (nothing to write) when the run has no stack. A first
-- stack is encoded alone: no table, no array to decode.
local function stacksWith(stack, stored, limit)
  if stack == nil or stack == '' or limit <= 0 then
    return nil
  end
  if not stored then
    return '[' .. cjson.encode(stack) .. ']'
  end
  local list = cjson.decode(stored)
  list[#list + 1] = stack
  while #list > limit do
    table.remove(list, 1)
  end
  return cjson.encode(list)
end

local function useAttempt(jobKey, q, id, now, nowText, reason, run)
  local f = run.job
  local made = run.made
  local stacks
  if run.encoded then
    stacks = run.stack ~= '' and run.stack or nil
  else
    stacks = stacksWith(run.stack, f[F_STACKS], tonumber(f[F_STACK_LIMIT]) or DEFAULT_STACK_TRACE_LIMIT)
  end
  local exhausted = tonumber(made) >= (tonumber(f[F_ATTEMPTS]) or DEFAULT_ATTEMPTS)
  if exhausted or run.final then
    if stacks then
      redis.call('HSET', jobKey, 'state', 'failed', 'finishedOn', nowText, 'attemptsMade', made, 'failedReason', reason, 'token', run.receipt,
        'stacktrace', stacks)
    else
      redis.call('HSET', jobKey, 'state', 'failed', 'finishedOn', nowText, 'attemptsMade', made, 'failedReason', reason, 'token', run.receipt)
    end
    redis.call('HINCRBY', q.meta, 'failedNew', '1')
    releaseDeduplication(q.meta, run.deid, id)
    emit(q, 'failed', 'jobId', id, 'failedReason', reason, 'prev', 'active')
    if exhausted then
      emit(q, 'retries-exhausted', 'jobId', id, 'attemptsMade', made)
    end
    return 'failed'
  end
  local delayMs = run.delayMs or backoffDelay(f[F_BACKOFF], tonumber(made), run.roll)
  if delayMs > 0 then
    local due = now + delayMs
    local dueText = string.format('%d', due)
    -- `lastDelay`: BullMQ's job.delay is the backoff while the retry waits it out (job-codec.ts reads it).
    enterDelayed(jobKey, q, id, dueText, {
      'attemptsMade', made, 'failedReason', reason, 'lastError', reason, 'lastDelay', string.format('%d', delayMs),
      'token', run.receipt .. ' delayed ' .. nowText, stacks and 'stacktrace', stacks, -- nil ends the list
    })
    emit(q, 'delayed', 'jobId', id, 'delay', dueText)
    return 'delayed', delayMs
  end
  enterWait(jobKey, q, id, nowText, false, tonumber(f[F_PRIORITY]) or 0, false, {
    'attemptsMade', made, 'failedReason', reason, 'lastError', reason, 'token', run.receipt .. ' wait ' .. nowText,
    stacks and 'stacktrace', stacks, -- nil ends the list
  })
  emit(q, 'waiting', 'jobId', id, 'prev', 'active')
  return 'wait'
end
