--[[
  A child leaves its parent (BullMQ's job.removeChildDependency), the child's half: its `parentKey` and
  `parent` fields go, and a `removed` entry for the parent goes to this queue's outbox (`handoffs`,
  lua/includes/handoff.lua), which lib/flows/handoffs.ts delivers to the parent's queue (settleChild-9.lua:
  the parent stops waiting for it and, if it was the last, moves on), as a removed child's does. The parent
  lives in another slot, so this script decides from the child alone whether the parent still counts it:
    no parentKey, or another parent than ARGV[2]  -> "none" (nothing to detach)
    an undelivered entry in the outbox            -> "pending" with it: the caller delivers it, then calls again
    completed, or failed under a failure policy   -> "none": its outcome already left the parent's dependencies
                                                     (BullMQ: not among them, so false)
    otherwise (waiting, delayed, running, waiting for children, failed with no policy) -> "detached"
  A running child is detached too (BullMQ does not refuse it): its finish then finds no parent.

  KEYS[1] job       HASH  <prefix>:{q}:<id>
  KEYS[2] handoffs  HASH  <prefix>:{q}:handoffs (child id -> entry)

  ARGV[1] job id
  ARGV[2] the parent's job key the caller knows (`<prefix>:{queue}:<id>`)

  Returns { "detached", entry }, { "pending", entry }, { "none" } or { "missing" } (no such job).
]]
local rcall = redis.call
local jobKey, handoffsKey = KEYS[1], KEYS[2]
local id, expectedParent = ARGV[1], ARGV[2]
-- @include handoff

local f = rcall('HMGET', jobKey, 'state', 'parentKey', 'parent')
local state, parentKey, parent = f[1], f[2], f[3]
if not state then
  return { 'missing' }
end
if not parentKey or parentKey ~= expectedParent then
  return { 'none' }
end
local pending = rcall('HGET', handoffsKey, id)
if pending then
  return { 'pending', pending }
end
if state == 'completed' or (state == 'failed' and flowPolicy(parent) ~= '') then
  return { 'none' }
end
rcall('HDEL', jobKey, 'parentKey', 'parent')
return { 'detached', handOff(handoffsKey, id, parentKey, parent, 'removed', '') }
