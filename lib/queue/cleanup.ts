/**
 * Removing many jobs, in bounded steps (each one script over at most CLEANUP_BATCH ids the caller read
 * first and the script re-checks): `drain` (waiting jobs, and delayed ones when asked), `clean` (finished
 * jobs past a grace period) and `obliterate` (the whole queue). A step never holds Redis for long, so
 * these run beside live workers; a job a worker takes meanwhile is left to it.
 */
import { EchoMQError } from '../errors.js'
import { deliverHandoffs } from '../flows/handoffs.js'
import { clean, type DrainSource, drain, type FinishedSet, type ObliterateSource, obliterate, outboxPage } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'
import { deleteDeduplicationHolds, dropFromRegistry, headIds, oldestIds, stateSize } from '../redis/queries.js'
import { parseIteration } from '../schedulers/iterations.js'
import { listSchedulers, removeScheduler } from '../schedulers/schedulers.js'

/** Ids per step: each passes six or seven keys (a parent's flow keys too), so one call stays well under 3,999 args. */
const CLEANUP_BATCH = 250

/**
 * Removes every waiting job (and, with `delayed`, every delayed one) and its log; resolves to how many. A
 * flow's child among them tells its parent, which moves on after its last (BullMQ's drain removes a parent
 * of the same queue instead: here it moves on, and goes too when drain reaches it, as a waiting job).
 */
export async function drainQueue(client: RedisClient, keys: QueueKeys, delayed: boolean): Promise<number> {
  let removed = 0
  const sources: DrainSource[] = delayed ? ['reserved', 'wait', 'prioritized', 'delayed'] : ['reserved', 'wait', 'prioritized']
  for (const source of sources) {
    for (;;) {
      const read = await headIds(client, keys, source, CLEANUP_BATCH)
      // A scheduler's pending iteration stays (as in BullMQ): the schedule goes on; remove the scheduler to stop it.
      const ids = source === 'delayed' ? read.filter((id) => parseIteration(id) === undefined) : read
      if (ids.length === 0) break
      const step = await drain(client, keys, source, ids)
      // A drained flow child lets its parent stop waiting for it (the last moves it on), as BullMQ's drain.
      if (step.handoffs.length > 0) await deliverHandoffs(client, keys, step.handoffs)
      const gone = step.removed
      removed += gone.length
      // None of them was still there: others took them; read again only if the source moved on.
      if (gone.length === 0 && (await headIds(client, keys, source, 1))[0] === read[0]) break
      if (ids.length < read.length && gone.length === ids.length) break
    }
  }
  return removed
}

/** Removes up to `limit` (0: all) jobs of a finished set that finished at least `graceMs` ago, oldest first; resolves to their ids. */
export async function cleanSet(client: RedisClient, keys: QueueKeys, set: FinishedSet, graceMs: number, limit: number): Promise<string[]> {
  const removed: string[] = []
  for (;;) {
    const n = limit === 0 ? CLEANUP_BATCH : Math.min(CLEANUP_BATCH, limit - removed.length)
    if (n <= 0) break
    const ids = await oldestIds(client, keys[set], n)
    if (ids.length === 0) break
    const step = await clean(client, keys, set, graceMs, ids)
    // A cleaned failed flow child lets its parent stop waiting for it (the last moves it on), as BullMQ's clean.
    if (step.handoffs.length > 0) await deliverHandoffs(client, keys, step.handoffs)
    removed.push(...step.removed)
    if (step.done || step.removed.length === 0) break
  }
  return removed
}

/**
 * Deletes the whole queue: every job with its lease and log (a parent with its flow keys; parents waiting
 * for children too), the outbox's outcomes delivered to their parents, then the queue's own keys, the
 * deduplication ids it holds with a ttl and its registry entry. Refused (ERR_QUEUE_ACTIVE, nothing deleted) while jobs are in flight, unless `force`.
 */
export async function obliterateQueue(client: RedisClient, keys: QueueKeys, prefix: string, queue: string, force: boolean): Promise<void> {
  if (!force && (await stateSize(client, keys, 'active')) > 0) throw refused(queue)
  // The schedulers first, so none makes a job while the queue goes.
  for (
    let page = await listSchedulers(client, keys, 0, 99, true);
    page.length > 0;
    page = await listSchedulers(client, keys, 0, 99, true)
  ) {
    for (const scheduler of page) await removeScheduler(client, keys, scheduler.key)
  }
  const sources: ObliterateSource[] = ['active', 'reserved', 'wait', 'prioritized', 'delayed', 'completed', 'failed', 'waiting-children']
  for (let round = 0; ; round++) {
    for (const source of sources) {
      for (;;) {
        const ids = await headIds(client, keys, source, CLEANUP_BATCH)
        if (ids.length === 0) break
        const step = await obliterate(client, keys, force, { source, ids })
        if (step.status === 'active') throw refused(queue)
        if (step.handoffs.length > 0) await deliverHandoffs(client, keys, step.handoffs)
        if (step.count === 0) break
      }
    }
    await deliverOutbox(client, keys)
    const last = await obliterate(client, keys, force, undefined)
    if (last.status === 'active') throw refused(queue)
    if (last.status === 'done') break
    // Jobs were added while it ran (a producer still adding): go round again, a bounded number of times.
    if (round >= 10)
      throw new EchoMQError('ERR_QUEUE_ACTIVE', `queue ${queue} kept receiving jobs while being obliterated; stop its producers`)
  }
  // A deduplication id held with a ttl is a key of its own, which would outlive the queue and swallow the
  // next add of that id (its holder gone, it would still be answered as the holder).
  await deleteDeduplicationHolds(client, keys)
  await dropFromRegistry(client, prefix, queue)
}

/** Tells parents (in other queues too) the outcomes of this queue's children still in its outbox, before it goes. */
async function deliverOutbox(client: RedisClient, keys: QueueKeys): Promise<void> {
  let cursor = '0'
  do {
    const page = await outboxPage(client, keys, cursor, CLEANUP_BATCH)
    if (page.entries.length > 0) await deliverHandoffs(client, keys, page.entries)
    cursor = page.next
  } while (cursor !== '0')
}

const refused = (queue: string) =>
  new EchoMQError(
    'ERR_QUEUE_ACTIVE',
    `Cannot obliterate queue with active jobs: queue ${queue} has jobs in flight or set aside by busy workers (pass { force: true })`,
  )
