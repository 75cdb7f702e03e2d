/**
 * The second half of a flow's hand-off: a child's final outcome, left in its queue's outbox (`handoffs`) by
 * the script that ended it (lua/includes/handoff.lua), is told to its parent's queue (lua/settleChild-9.lua,
 * in the parent's slot), then deleted from the outbox: by the same call when the parent is in the child's
 * queue, else by a second one in the child's slot (forgetHandoffs-1.lua). The worker that ended the child delivers at once, and
 * emits the child's `completed` or `failed` event only once the parent knows (BullMQ's order: a read in the
 * event's handler sees the outcome at the parent). A crash between the two steps leaves the entry, which
 * every sweep of the child's queue delivers (lib/sweep.ts, the workers' stalled check and the reaper).
 * Settling is idempotent, so a late or repeated delivery changes nothing: a parent moves on once, whoever
 * delivers; entries of a retried child are ordered by its retry count (lua/settleChild-9.lua).
 */
import { type ChildOutcome, removeHandoffs, type Settlement, settleChildren } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import { parseJobKey, type QueueKeys, queueKeys } from '../redis/keys.js'

/** Most children one settle call tells their parents about. */
const SETTLE_PER_CALL = 100

const OUTCOMES: readonly string[] = ['completed', 'removed', 'fpof', 'cpof', 'idof', 'rdof', 'retried']

/** An entry's outcome letter (lua/includes/handoff.lua). */
const LETTER_OUTCOMES: Record<string, ChildOutcome> = {
  c: 'completed',
  r: 'removed',
  t: 'retried',
  f: 'fpof',
  p: 'cpof',
  i: 'idof',
  d: 'rdof',
}

/**
 * An outbox entry read back; undefined for one that is not an entry (dropped). Entries are
 * "<outcome letter><generation>\n<parent's key>\n<value>", or JSON (a parent key with a newline, or an entry
 * written before that format).
 */
function parseEntry(text: string): { parentKey: string; outcome: ChildOutcome; value: string; gen: number } | undefined {
  if (typeof text !== 'string') return undefined
  if (!text.startsWith('{')) {
    const head = /^([a-z])(\d*)\n/.exec(text)
    const outcome = head && LETTER_OUTCOMES[head[1] as string]
    const end = head ? text.indexOf('\n', head[0].length) : -1
    if (!head || !outcome || end < 0) return undefined
    const gen = head[2] === '' ? 0 : Number(head[2])
    return { parentKey: text.slice(head[0].length, end), outcome, value: text.slice(end + 1), gen: Number.isSafeInteger(gen) ? gen : 0 }
  }
  try {
    const e = JSON.parse(text) as { parentKey?: unknown; outcome?: unknown; value?: unknown; gen?: unknown }
    if (typeof e.parentKey !== 'string' || typeof e.outcome !== 'string' || !OUTCOMES.includes(e.outcome)) return undefined
    const gen = typeof e.gen === 'number' && Number.isSafeInteger(e.gen) && e.gen > 0 ? e.gen : 0
    return { parentKey: e.parentKey, outcome: e.outcome as ChildOutcome, value: typeof e.value === 'string' ? e.value : '', gen }
  } catch {
    return undefined
  }
}

/**
 * Tells the parents about entries of `childKeys`' outbox (child id -> entry): one settle call per parent queue
 * (and per SETTLE_PER_CALL children). The entries of parents in the child's own queue leave the outbox in
 * the same call. Resolves to the parents that moved on, and the entries still to delete.
 */
async function settleHandoffs(
  client: RedisClient,
  childKeys: QueueKeys,
  entries: [string, string][],
): Promise<{ released: number; left: [string, string][] }> {
  const byQueue = new Map<string, { keys: QueueKeys; settlements: Settlement[] }>()
  const left: [string, string][] = []
  for (const pair of entries) {
    const [childId, text] = pair
    const entry = parseEntry(text)
    const parent = entry && parseJobKey(entry.parentKey)
    if (!entry || !parent || parent.id === '') {
      left.push(pair)
      continue
    }
    const at = `${parent.prefix}\n${parent.queue}`
    let group = byQueue.get(at)
    if (!group) {
      group = { keys: queueKeys(parent.prefix, parent.queue), settlements: [] }
      byQueue.set(at, group)
    }
    // Its own queue: the settle call deletes the entry (it compares what it delivers with what is held).
    const own = group.keys.handoffs === childKeys.handoffs && group.keys.job(parent.id) === entry.parentKey
    if (!own) left.push(pair)
    group.settlements.push({
      parentId: parent.id,
      childKey: childKeys.job(childId),
      outcome: entry.outcome,
      value: entry.value,
      gen: entry.gen,
      ...(own ? { ownId: childId } : {}),
    })
  }
  let released = 0
  for (const { keys, settlements } of byQueue.values()) {
    for (let i = 0; i < settlements.length; i += SETTLE_PER_CALL) {
      const codes = await settleChildren(client, keys, settlements.slice(i, i + SETTLE_PER_CALL))
      released += codes.filter((c) => c === 'released').length
    }
  }
  return { released, left }
}

/**
 * Delivers entries of `childKeys`' outbox: settles them, then deletes them. `settled` is called between the
 * two, once every parent knows (the worker emits its children's events then). Resolves to the parents that
 * moved on.
 */
export async function deliverHandoffs(
  client: RedisClient,
  childKeys: QueueKeys,
  entries: [string, string][],
  settled?: () => void,
): Promise<number> {
  const { released, left } = await settleHandoffs(client, childKeys, entries)
  settled?.()
  await removeHandoffs(client, childKeys, left)
  return released
}
