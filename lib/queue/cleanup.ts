/**
 * Removing many jobs, in bounded steps (each one script over at most CLEANUP_BATCH ids read before it and
 * re-checked by it): `drain` (waiting jobs, and delayed ones when asked), `clean` (jobs of a finished or a
 * waiting state past a grace period) and `obliterate` (the whole queue). A step never holds Redis for long, so
 * these run beside live workers; a job a worker takes meanwhile is left to it.
 */
import { EchoMQError } from '../errors.js'
import { deliverHandoffs } from '../flows/handoffs.js'
import {
  type CleanPlace,
  type CleanSource,
  clean,
  cleanWaiting,
  type DrainSource,
  drain,
  type FinishedSet,
  type ObliterateSource,
  obliterate,
  outboxPage,
} from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'
import { deleteDeduplicationHolds, dropFromRegistry, headIds, oldestIds, pendingRuns, serverTimeMs, stateSize } from '../redis/queries.js'
import { listSchedulers, removeScheduler } from '../schedulers/schedulers.js'

/** Ids per step: each passes six or seven keys (a parent's flow keys too), so one call stays well under 3,999 args. */
const CLEANUP_BATCH = 250
/** Candidates per step of a waiting state's clean: each passes seven keys (its scheduler's too). */
const CLEAN_WAITING_BATCH = 200

/**
 * Removes every waiting job (and, with `delayed`, every delayed one) and its log; resolves to how many. A
 * flow's child among them tells its parent, which moves on after its last (BullMQ's drain removes a parent
 * of the same queue instead: here it moves on, and goes too when drain reaches it, as a waiting job).
 */
export async function drainQueue(client: RedisClient, keys: QueueKeys, delayed: boolean): Promise<number> {
  let removed = 0
  const sources: DrainSource[] = delayed ? ['reserved', 'wait', 'prioritized', 'delayed'] : ['reserved', 'wait', 'prioritized']
  for (const source of sources) {
    // A scheduler's pending run stays (as in BullMQ): the schedule goes on. The runs kept stay near the
    // head, so each read covers them and as many more, and leaves them out by id.
    const kept = new Set<string>()
    for (;;) {
      const read = (await headIds(client, keys, source, kept.size + CLEANUP_BATCH)).filter((id) => !kept.has(id))
      if (read.length === 0) break
      for (const id of await pendingRuns(client, keys, read)) kept.add(id)
      const ids = read.filter((id) => !kept.has(id))
      if (ids.length === 0) continue
      const step = await drain(client, keys, source, ids)
      // A drained flow child lets its parent stop waiting for it (the last moves it on), as BullMQ's drain.
      if (step.handoffs.length > 0) await deliverHandoffs(client, keys, step.handoffs)
      removed += step.removed.length
      // None of them was still there: others took them; read again only if the line moved on.
      if (step.removed.length === 0) {
        const again = (await headIds(client, keys, source, kept.size + 1)).filter((id) => !kept.has(id))
        if (again[0] === ids[0]) break
      }
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

/** The waiting states clean takes, and where each one's jobs are, the first in line first. */
export type WaitingState = 'wait' | 'prioritized' | 'delayed'
const WAITING_SOURCES: Record<WaitingState, CleanSource[]> = {
  wait: ['reserved', 'wait'],
  prioritized: ['reserved', 'prioritized'],
  delayed: ['delayed'],
}

/**
 * Jobs of `wait` within the grace period a clean passes over before it stops: each step's LREM walks them
 * from the tail (some 60 ns a job), so this bounds a step's Redis time (about a millisecond). BullMQ's clean
 * looks at no more of a list than its oldest 10,000 (or `limit`) either.
 */
const MAX_PASSED_IN_WAIT = 10_000
/** Steps in a row that neither removed a job nor moved on (the line moving under each read) before clean gives up. */
const MAX_IDLE_STEPS = 5
/** Most steps of one waiting state's clean: 10 million candidates at CLEAN_WAITING_BATCH a step. */
const MAX_STEPS = 50_000

/**
 * Removes up to `limit` (0: all) jobs of a waiting state whose timestamp (BullMQ's, see cleanWaiting-10.lua)
 * is at least `graceMs` old, oldest first, as queue.remove removes them; resolves to their ids. Jobs within
 * the grace period are passed over, not a stop (in `wait`, at most MAX_PASSED_IN_WAIT of them).
 */
export async function cleanWaitingState(
  client: RedisClient,
  keys: QueueKeys,
  state: WaitingState,
  graceMs: number,
  limit: number,
): Promise<string[]> {
  // One bound for the whole call: jobs that join the line while it runs are not what it was asked to clean.
  const bound = (await serverTimeMs(client)) - graceMs
  const removed: string[] = []
  for (const source of WAITING_SOURCES[state]) {
    let at: CleanPlace = { frontier: 0, anchor: '', next: [] }
    // Workers taking the jobs passed over reset the walk (the anchor gone): MAX_STEPS bounds the call whatever they do.
    for (let idle = 0, steps = 0; idle < MAX_IDLE_STEPS && steps < MAX_STEPS; steps++) {
      const room = limit === 0 ? CLEAN_WAITING_BATCH : limit - removed.length
      if (room <= 0) return removed
      const most = source === 'wait' ? MAX_PASSED_IN_WAIT : Number.MAX_SAFE_INTEGER
      const step = await cleanWaiting(client, keys, { source, state, bound, room, batch: CLEAN_WAITING_BATCH, most }, at)
      // A cleaned flow child lets its parent stop waiting for it (the last moves it on), as queue.remove.
      if (step.handoffs.length > 0) await deliverHandoffs(client, keys, step.handoffs)
      removed.push(...step.removed)
      idle = step.removed.length > 0 || step.at.frontier > at.frontier || at.next.length === 0 ? 0 : idle + 1
      at = step.at
      // At the source's end; unless a parent just moved on, which may have joined this very line.
      if (at.next.length === 0 && step.handoffs.length === 0) break
    }
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
