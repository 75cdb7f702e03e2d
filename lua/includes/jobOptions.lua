-- A new job's option fields as addFlow-10.lua takes them (ARGV[a + 4 .. a + 12]: attempts,
-- delay, backoff, keep, keepFailed, keepLogs, priority, lifo, stackTraceLimit), appended to `fields` as
-- the job hash stores them: an option at its default is not stored (the scripts read an absent field as
-- the default, see lib/redis/job-codec.ts).
local function putOptions(fields, a, deid)
  local function put(field, value, default)
    if value ~= default then
      fields[#fields + 1] = field
      fields[#fields + 1] = value
    end
  end
  put('attempts', tonumber(ARGV[a + 4]), DEFAULT_ATTEMPTS)
  put('backoff', ARGV[a + 6], '')
  put('keep', ARGV[a + 7], DEFAULT_KEEP.completed)
  put('keepFailed', ARGV[a + 8], DEFAULT_KEEP.failed)
  put('keepLogs', ARGV[a + 9], '')
  put('priority', tonumber(ARGV[a + 10]), 0)
  -- Kept only when given, for job.opts (BullMQ's): a job without them stores neither.
  put('delay', tonumber(ARGV[a + 5]), 0)
  put('lifo', ARGV[a + 11] == '1' and '1' or '', '')
  put('stackTraceLimit', tonumber(ARGV[a + 12]) or DEFAULT_STACK_TRACE_LIMIT, DEFAULT_STACK_TRACE_LIMIT)
  put('deid', deid, nil)
end
