/**
 * Removing a job of a flow (queue.remove, job.remove), BullMQ's default `removeChildren: true`: a parent
 * goes first (with its own keys), then its children, each in its own queue, recursively; a child that had
 * not completed tells its parent it is gone, so the parent stops waiting for it (the last one moves it on).
 * A job with no children costs its one remove call, as before: the script answers `parent` only for a job
 * that has any. While a job of the tree runs (a pending child or theirs, as BullMQ's lock check walks them),
 * nothing is removed and the answer is `tree-active` (BullMQ refuses: locked). The tree spans slots, so the check
 * is a read before the removal: a child taken between the two is left to its worker (its end then finds no
 * parent, and changes nothing).
 */
import { pendingChildren, readDependencies, remove } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import { parseJobKey, type QueueKeys, queueKeys } from '../redis/keys.js'
import { jobState } from '../redis/queries.js'
import { deliverHandoffs } from './handoffs.js'

export async function removeJob(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  removeChildren = true,
  tellParent = true,
  depth = 0,
): Promise<'removed' | 'missing' | 'active' | 'tree-active' | 'scheduler'> {
  // No depth limit: a tree built with `opts.parent` may go deeper than a flow may (a limit left the jobs
  // below it behind a removed parent). Each job is removed once, so even a cycle of parents ends.
  // A job scheduler's pending run is refused when asked for by name (depth 0), as BullMQ's remove refuses it.
  const schedulerCheck = depth === 0
  let reply = await remove(client, keys, id, { tellParent, parentCheck: removeChildren, schedulerCheck })
  let children: string[] = []
  if (reply.outcome === 'parent') {
    if (depth === 0 && (await treeRunning(client, keys, id, new Set()))) return 'tree-active'
    const d = await readDependencies(client, keys, id)
    children = [...Object.keys(d.processed), ...d.unprocessed, ...Object.keys(d.ignored), ...d.failed]
    reply = await remove(client, keys, id, { tellParent, schedulerCheck })
  }
  if (reply.outcome === 'parent') return 'active'
  if (reply.handoff) await deliverHandoffs(client, keys, [[id, reply.handoff]])
  for (const key of children) {
    const at = parseJobKey(key)
    if (at && at.id !== '') await removeJob(client, queueKeys(at.prefix, at.queue), at.id, true, false, depth + 1)
  }
  return reply.outcome === 'kept' ? 'removed' : reply.outcome
}

/**
 * Whether a pending child of `id`, or one of theirs, is running: a read of each level's children. `seen`
 * holds the job keys read, so a cycle of parents (possible with `opts.parent` on existing jobs) ends.
 */
async function treeRunning(client: RedisClient, keys: QueueKeys, id: string, seen: Set<string>): Promise<boolean> {
  seen.add(keys.job(id))
  const children = (await pendingChildren(client, keys, id)).flatMap((key) => {
    const at = parseJobKey(key)
    return at && at.id !== '' && !seen.has(key) ? [{ keys: queueKeys(at.prefix, at.queue), id: at.id }] : []
  })
  const states = await Promise.all(children.map((c) => jobState(client, c.keys, c.id)))
  if (states.includes('active')) return true
  // One level at a time, so `seen` holds every job of the levels above before the next is read.
  for (const [i, c] of children.entries()) {
    if ((states[i] as string) === 'waiting-children' && !seen.has(c.keys.job(c.id)) && (await treeRunning(client, c.keys, c.id, seen)))
      return true
  }
  return false
}
