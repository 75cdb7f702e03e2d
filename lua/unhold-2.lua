--[[
  Releases a deduplication id only if job `id` holds it (BullMQ's job.removeDeduplicationKey()): a job no
  longer the cause of the deduplication leaves the new holder's hold alone. See includes/deduplicate.lua
  for where a hold is kept.

  KEYS[1] meta           HASH   <prefix>:{q}:meta (field de:<deduplication id>: a hold without a ttl)
  KEYS[2] deduplication  STRING <prefix>:{q}:de:<deduplication id> (a hold with a ttl)

  ARGV[1] the deduplication id
  ARGV[2] the job id

  Returns 1 when the job held the id (released), else 0.
]]
local rcall = redis.call
local field, id = 'de:' .. ARGV[1], ARGV[2]
if rcall('HGET', KEYS[1], field) == id then
  return rcall('HDEL', KEYS[1], field)
end
if rcall('GET', KEYS[2]) == id then
  return rcall('DEL', KEYS[2])
end
return 0
