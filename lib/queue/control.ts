/**
 * What a Queue does to the whole queue: pause and resume (every worker, on every host), the rate limit
 * (rateLimit, getRateLimitTtl), and clean-up (drain, clean, obliterate; queue/cleanup.ts does the steps).
 */
import { EchoMQError } from '../errors.js'
import * as commands from '../redis/commands.js'
import { rateLimitTtl, isPaused as readPaused } from '../redis/queries.js'
import { checkInteger, checkKnown, describe, fail, opt } from '../validate.js'
import { cleanSet, cleanWaitingState, drainQueue, obliterateQueue } from './cleanup.js'
import type { QueueCore } from './core.js'

/** Every worker of the queue, on every host, stops taking jobs (running ones finish); adds and recoveries go on. */
export async function pause(q: QueueCore): Promise<void> {
  q.assertOpen()
  await q.call('pause queue', () => commands.setPaused(q.client, q.keys, true))
  q.emitter.emit('paused')
}

/** Workers take jobs again. */
export async function resume(q: QueueCore): Promise<void> {
  q.assertOpen()
  await q.call('resume queue', () => commands.setPaused(q.client, q.keys, false))
  q.emitter.emit('resumed')
}

export async function isPaused(q: QueueCore): Promise<boolean> {
  q.assertOpen()
  return q.call('read the state of queue', () => readPaused(q.client, q.keys))
}

/** Holds every worker of the queue back from starting jobs for `ms` (BullMQ's rateLimit). */
export async function rateLimit(q: QueueCore, ms: number): Promise<void> {
  q.assertOpen()
  checkInteger('ms', ms, { min: 0, max: 2 ** 31 - 1, unit: 'ms' })
  await q.call('rate-limit queue', () => commands.rateLimit(q.client, q.keys, ms))
}

/** BullMQ's removeRateLimitKey(): the hold lifted and the limiters' window emptied; 1 when there was either. */
export async function removeRateLimitKey(q: QueueCore): Promise<number> {
  q.assertOpen()
  return q.call('lift the rate limit of queue', () => commands.removeRateLimit(q.client, q.keys))
}

/** BullMQ's getRateLimitTtl(maxJobs?) (see Queue.getRateLimitTtl; redis/queries.ts rateLimitTtl says how). */
export async function getRateLimitTtl(q: QueueCore, maxJobs?: number): Promise<number> {
  if (maxJobs !== undefined && (!Number.isInteger(maxJobs) || maxJobs < 0))
    throw new EchoMQError('ERR_OPTIONS', `expected maxJobs to be an integer >= 0, got: ${String(maxJobs)}`)
  q.assertOpen()
  return q.call('read the rate limit of queue', () => rateLimitTtl(q.client, q.keys, maxJobs || undefined))
}

/** Removes every waiting job, and with `delayed` every delayed one, with their logs (BullMQ's drain). */
export async function drain(q: QueueCore, delayed: boolean): Promise<void> {
  q.assertOpen()
  if (typeof delayed !== 'boolean') fail('ERR_OPTIONS', `expected drain's delayed to be true or false, got: ${describe(delayed)}`)
  await q.call('drain queue', () => drainQueue(q.client, q.keys, delayed))
}

/** The types BullMQ 6.7's clean takes ('active' is refused here: see clean). */
export type CleanType = 'completed' | 'wait' | 'waiting' | 'active' | 'paused' | 'prioritized' | 'delayed' | 'failed'
const CLEAN_TYPES: readonly string[] = ['completed', 'failed', 'wait', 'waiting', 'paused', 'prioritized', 'delayed']

/**
 * BullMQ's clean (see Queue.clean): up to `limit` jobs of `type` older than `grace` ms. 'paused' lists no
 * job (getters.ts: a paused queue's jobs wait in `wait`), so it removes none, as BullMQ 6.7's.
 */
export async function clean(q: QueueCore, grace: number, limit: number, type: CleanType): Promise<string[]> {
  q.assertOpen()
  checkInteger('grace', grace, { min: 0, max: Number.MAX_SAFE_INTEGER, unit: 'ms' })
  checkInteger('limit', limit, { min: 0, max: Number.MAX_SAFE_INTEGER })
  // BullMQ removes active jobs whose lock is gone; here such a job's lease lapsed and the sweep recovers it
  // (back in line, or failed), while its worker may still finish it: removing it would race both.
  if (type === 'active')
    fail('ERR_OPTIONS', "clean does not take active: an active job holds a lease, and one whose lease lapsed is the sweep's to recover")
  if (!CLEAN_TYPES.includes(type))
    fail('ERR_OPTIONS', `expected clean's type to be one of ${CLEAN_TYPES.join(', ')}, got: ${describe(type)}`)
  // BullMQ names 'waiting' 'wait' in the cleaned event too.
  const named = type === 'waiting' ? 'wait' : type
  const ids = await q.call(`clean ${named} jobs of queue`, () => {
    if (named === 'completed' || named === 'failed') return cleanSet(q.client, q.keys, named, grace, limit)
    return named === 'paused' ? Promise.resolve([]) : cleanWaitingState(q.client, q.keys, named, grace, limit)
  })
  q.emitter.emit('cleaned', ids, named)
  return ids
}

/** Deletes the queue (see Queue.obliterate); refused with ERR_QUEUE_ACTIVE while jobs are in flight, unless `force`. */
export async function obliterate(q: QueueCore, options?: { force?: boolean }): Promise<void> {
  q.assertOpen()
  const o = checkKnown('obliterate', options, ['force'])
  const force = opt(o.force, false, (v) => {
    if (typeof v !== 'boolean') fail('ERR_OPTIONS', `expected force to be true or false, got: ${describe(v)}`)
    return v
  })
  // Paused first, as BullMQ does, so no worker takes a job meanwhile; a refused call (jobs in flight,
  // not forced) leaves the queue as it found it.
  const pausedHere = await q.call('pause queue', () => commands.setPaused(q.client, q.keys, true))
  try {
    await q.call('obliterate queue', () => obliterateQueue(q.client, q.keys, q.settings.prefix, q.name, force))
  } catch (err) {
    if (pausedHere && err instanceof EchoMQError && err.code === 'ERR_QUEUE_ACTIVE') await resume(q)
    throw err
  }
}
