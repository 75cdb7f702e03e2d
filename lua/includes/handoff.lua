-- A flow's child reached a final outcome (completed; failed for good; removed): what its parent must learn
-- goes to the child's queue's outbox, `handoffs` (child id -> entry), in the step that ended the child. The
-- parent lives in another queue's slot (on a Redis Cluster, maybe another node), so no script can reach
-- both: the worker, or a later sweep of this queue, delivers the entry with settleChild-9.lua (idempotent)
-- and then deletes it (lib/flows/handoffs.ts). The entry holds all it needs, so it outlives the child's
-- hash (a retention of 0 removes it at once). A failed child tells its parent only under one of the
-- failure policies (BullMQ's failParentOnFailure, continueParentOnFailure, ignoreDependencyOnFailure,
-- removeDependencyOnFailure, kept in the `parent` field as BullMQ keeps them: fpof, cpof, idof, rdof):
-- without one, it stays among the parent's dependencies, as in BullMQ. A job with no parent costs nothing
-- here: the callers read `parentKey` in the read they already make. Returns the entry, or false for none.
-- An entry's text: "<outcome letter><generation>\n<parent's key>\n<value>" (lib/flows/handoffs.ts parses
-- it; settleChild-9.lua rebuilds it to compare), a third of the JSON it replaced, which the worker's finish
-- reply carries once per child. The generation is empty for none. A parent key holding a newline (no id
-- EchoMQ makes has one) is still written as JSON { parentKey, outcome, value, gen }, which both readers
-- also take (entries written before this format, too).
local HANDOFF_LETTERS = { completed = 'c', removed = 'r', retried = 't', fpof = 'f', cpof = 'p', idof = 'i', rdof = 'd' }
local function handoffEntry(letter, genText, parentKey, value)
  return letter .. genText .. '\n' .. parentKey .. '\n' .. value
end

local function flowPolicy(parent)
  if not parent then
    return ''
  end
  local p = cjson.decode(parent)
  return (p.fpof and 'fpof') or (p.cpof and 'cpof') or (p.idof and 'idof') or (p.rdof and 'rdof') or ''
end

-- `outcome`: 'completed', 'removed' or 'failed'; the entry's outcome names a failure by its policy (what
-- settleChild-9.lua does with it). `removedNow`: a failed child removed as it fails (its retention in
-- `failed` is 0): without a policy it leaves its parent's dependencies as a removed child does, so its
-- parent is not left waiting for a job that is gone (BullMQ's removeParentDependencyKey in moveToFinished).
-- `gen`: the child's `retried` count (its run's generation; false or nil for none), so its parent can tell
-- a failure that arrives after the child's retry from the retried run's own (settleChild-9.lua).
-- `outbox`: a list the caller writes to `handoffs` itself, in one HSET for many children (id, entry, ...);
-- without it the entry is written here.
local function handOff(handoffsKey, id, parentKey, parent, outcome, value, removedNow, gen, outbox)
  if outcome == 'failed' then
    outcome = flowPolicy(parent)
    if outcome == '' and removedNow then
      outcome = 'removed'
    elseif outcome == '' then
      return false
    end
  end
  gen = tonumber(gen)
  local entry
  if string.find(parentKey, '\n', 1, true) then
    entry = cjson.encode({ parentKey = parentKey, outcome = outcome, value = value, gen = (gen and gen > 0) and gen or nil })
  else
    entry = handoffEntry(HANDOFF_LETTERS[outcome], (gen and gen > 0) and string.format('%d', gen) or '', parentKey, value)
  end
  if outbox then
    outbox[#outbox + 1] = id
    outbox[#outbox + 1] = entry
  else
    redis.call('HSET', handoffsKey, id, entry)
  end
  return entry
end
