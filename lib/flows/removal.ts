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

/** Most levels of children one removal follows. */
const MAX_DEPTH = 100

export async function removeJob(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  removeChildren = true,
  tellParent = true,
  depth = 0,
): Promise<'removed' | 'missing' | 'active' | 'tree-active'> {
  let reply = await remove(client, keys, id, { tellParent, parentCheck: removeChildren && depth < MAX_DEPTH })
  let children: string[] = []
  if (reply.outcome === 'parent') {
    if (depth === 0 && (await treeRunning(client, keys, id, 0))) return 'tree-active'
    const d = await readDependencies(client, keys, id)
    children = [...Object.keys(d.processed), ...d.unprocessed, ...Object.keys(d.ignored), ...d.failed]
    reply = await remove(client, keys, id, { tellParent })
  }
  if (reply.outcome === 'parent') return 'active'
  if (reply.handoff) await deliverHandoffs(client, keys, [[id, reply.handoff]])
  for (const key of children) {
    const at = parseJobKey(key)
    if (at && at.id !== '') await removeJob(client, queueKeys(at.prefix, at.queue), at.id, true, false, depth + 1)
  }
  return reply.outcome === 'kept' ? 'removed' : reply.outcome
}

/** Whether a pending child of `id`, or one of theirs, is running: a read of each level's children. */
async function treeRunning(client: RedisClient, keys: QueueKeys, id: string, depth: number): Promise<boolean> {
  const children = (await pendingChildren(client, keys, id)).flatMap((key) => {
    const at = parseJobKey(key)
    return at && at.id !== '' ? [{ keys: queueKeys(at.prefix, at.queue), id: at.id }] : []
  })
  const states = await Promise.all(children.map((c) => jobState(client, c.keys, c.id)))
  if (states.includes('active')) return true
  if (depth + 1 >= MAX_DEPTH) return false
  const below = await Promise.all(
    children.map((c, i) => (states[i] as string) === 'waiting-children' && treeRunning(client, c.keys, c.id, depth + 1)),
  )
  return below.includes(true)
}
