/**
 * Loosening a flow, BullMQ 6.7's two methods:
 * - job.removeChildDependency(): the child leaves its parent (its `parentKey` and `parent` go) and the
 *   parent stops waiting for it; if it was the last, the parent moves on, as when a child is removed.
 *   Resolves to true when the parent still counted the child, false when it did not (no parent, or its
 *   outcome already reached the parent). A missing child, then a missing parent, is refused (ERR_JOB_MISSING)
 *   before anything changes.
 * - job.removeUnprocessedChildren(): the parent's pending children are removed (with their own pending
 *   children), except those running, completed or failed, which stay with the parent; each tells the parent
 *   it is gone, so the last moves it on (BullMQ's script for it does the same).
 * Child and parent may sit in different cluster slots: the child's side changes in one script in its queue
 * and leaves the parent's part in its queue's outbox, delivered here at once (lib/flows/handoffs.ts) or by
 * the next sweep of the child's queue after a crash, as a child's outcome is.
 */
import { EchoMQError } from '../errors.js'
import { detachChild, jobsExist, pendingChildren, remove } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import { parseJobKey, type QueueKeys, queueKeys } from '../redis/keys.js'
import { deliverHandoffs } from './handoffs.js'

/** Most levels of children one removal follows (as lib/flows/removal.ts). */
const MAX_DEPTH = 100

/** Times an undelivered outcome of the child is delivered before it is detached (one is enough unless it ends again). */
const MAX_PENDING = 3

export async function removeChildDependency(
  client: RedisClient,
  keys: QueueKeys,
  queue: string,
  id: string,
  parentKey: string | undefined,
): Promise<boolean> {
  const [childExists, parentExists] = await jobsExist(client, parentKey ? [keys.job(id), parentKey] : [keys.job(id)])
  const missing = (what: string) => new EchoMQError('ERR_JOB_MISSING', `${what} does not exist: no dependency was removed`)
  if (!childExists) throw missing(`job ${id} of queue ${queue}`)
  // BullMQ reads the parent from the Job object; one read without a parent has no dependency to remove.
  if (!parentKey) return false
  if (!parentExists) throw missing(`parent job ${parentKey} of job ${id}`)
  for (let i = 0; i < MAX_PENDING; i++) {
    const reply = await detachChild(client, keys, id, parentKey)
    if (reply.status === 'none') return false
    if (reply.status === 'missing') throw missing(`job ${id} of queue ${queue}`)
    // A pending entry is the child's own outcome, not yet told: told first, it decides what detaching means.
    await deliverHandoffs(client, keys, [[id, reply.entry]])
    if (reply.status === 'detached') return true
  }
  return false
}

export async function removeUnprocessedChildren(client: RedisClient, keys: QueueKeys, id: string): Promise<void> {
  for (const key of await pendingChildren(client, keys, id)) {
    const at = parseJobKey(key)
    if (at && at.id !== '') await removeUnprocessed(client, queueKeys(at.prefix, at.queue), at.id, true, 1)
  }
}

/**
 * One pending child: left alone when running, completed or failed; else its own pending children first (they
 * need not tell it: it goes too), then itself, telling its parent when `tellParent`.
 */
async function removeUnprocessed(client: RedisClient, keys: QueueKeys, id: string, tellParent: boolean, depth: number): Promise<void> {
  let reply = await remove(client, keys, id, { tellParent, parentCheck: depth < MAX_DEPTH, keepFinished: true })
  if (reply.outcome === 'parent') {
    for (const key of await pendingChildren(client, keys, id)) {
      const at = parseJobKey(key)
      if (at && at.id !== '') await removeUnprocessed(client, queueKeys(at.prefix, at.queue), at.id, false, depth + 1)
    }
    reply = await remove(client, keys, id, { tellParent, keepFinished: true })
  }
  if (reply.handoff) await deliverHandoffs(client, keys, [[id, reply.handoff]])
}
