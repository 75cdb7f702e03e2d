--[[
  A QueueEvents says it listens to the queue (or that it leaves). `listened` holds one mark per listener:
  its id, scored with when the mark ends (ms, Redis's clock). The key expires with the latest mark, so
  the scripts that write events (includes/events.lua) test only that it exists; a listener with a short
  mark never shortens a longer one's, and one that leaves takes only its own mark: the key goes with the
  last. Marks that ended (a listener gone without a word) are dropped here.

  KEYS[1] listened  ZSET  <prefix>:{q}:listened

  ARGV[1] the listener's id
  ARGV[2] how long its mark lasts (ms); 0: it leaves

  Returns 1 when the listener's mark was not there (its first mark, or a mark lost: Redis restarted empty
  or flushed, the key evicted or deleted, the listener frozen past its mark), so events may have gone
  unwritten since its last mark; else 0.
]]
local rcall = redis.call
local listenedKey = KEYS[1]
local id, ttlMs = ARGV[1], tonumber(ARGV[2])
-- @include now

local now = nowMs()
-- A mark of an EchoMQ from before listeners were named is a STRING: replaced.
if rcall('TYPE', listenedKey).ok == 'string' then rcall('DEL', listenedKey) end
rcall('ZREMRANGEBYSCORE', listenedKey, '-inf', now)
local absent
if ttlMs > 0 then
  absent = rcall('ZADD', listenedKey, now + ttlMs, id)
else
  absent = 1 - rcall('ZREM', listenedKey, id)
end
local latest = rcall('ZRANGE', listenedKey, -1, -1, 'WITHSCORES')[2]
if latest then rcall('PEXPIREAT', listenedKey, latest) end
return absent
