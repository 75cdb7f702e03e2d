-- Queue events, for QueueEvents (lib/queue-events.ts): one entry of the queue's stream per change, written
-- by the script that makes the change, with BullMQ's names and fields. Only while a listener has said it
-- listens (the `listened` key: each QueueEvents' mark, the key expiring with the latest, lua/listen-1.lua):
-- a queue nobody watches pays one EXISTS per script call and keeps no stream. The stream is capped near meta's `maxLenEvents`
-- (the Queue option streams.events.maxLen), 10,000 by default, trimmed as BullMQ trims it (MAXLEN ~):
-- whole nodes at a time, about 0.8 µs an entry, where an exact cap costs some 7 µs an entry at 10,000.
-- `q` holds the queue's keys { events, listened, meta, ... }; the answer is cached in it for the call.
local EVENTS_MAXLEN_DEFAULT = 10000
local function listening(q)
  if q.listening == nil then
    q.listening = rcall('EXISTS', q.listened) == 1
    if q.listening then
      q.maxLen = rcall('HGET', q.meta, 'maxLenEvents') or tostring(EVENTS_MAXLEN_DEFAULT)
    end
  end
  return q.listening
end

local function emit(q, event, ...)
  if listening(q) then
    rcall('XADD', q.events, 'MAXLEN', '~', q.maxLen, '*', 'event', event, ...)
  end
end
