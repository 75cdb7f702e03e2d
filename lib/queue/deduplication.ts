/**
 * A Queue's deduplication ids (BullMQ's getDeduplicationJobId, removeDeduplicationKey); lib/deduplication.ts
 * has the option and the holders an add expects.
 */
import { deduplicationOption } from '../deduplication.js'
import { holderOf, removeHold } from '../redis/deduplication.js'
import type { QueueCore } from './core.js'

/** The id of the job that holds deduplication id `id` now, or null. */
export async function getDeduplicationJobId(q: QueueCore, id: string): Promise<string | null> {
  q.assertOpen()
  deduplicationOption({ id }, undefined)
  return q.call('read a deduplication id of queue', () => holderOf(q.client, q.keys, id))
}

/** Releases deduplication id `id` whoever holds it: 1 when it was held, else 0. */
export async function removeDeduplicationKey(q: QueueCore, id: string): Promise<number> {
  q.assertOpen()
  deduplicationOption({ id }, undefined)
  return q.call('remove a deduplication id of queue', () => removeHold(q.client, q.keys, id))
}
