/**
 * The queue's own limits, across every worker on every host (BullMQ's setGlobalConcurrency and
 * setGlobalRateLimit): stored in meta under BullMQ's field names, read by each take in the HMGET it makes
 * anyway (lua/includes/takeJobs.lua admission), so a queue that sets none pays nothing more.
 */
import {
  globalLimits,
  removeGlobalLimit,
  setGlobalConcurrency as setConcurrency,
  setGlobalRateLimit as setRateLimit,
  stateSize,
} from '../redis/queries.js'
import { checkInteger } from '../validate.js'
import type { QueueCore } from './core.js'

/** The most either limit may say: what a Lua number and a PX keep exact. */
const MOST = 2 ** 31 - 1

/** At most `concurrency` jobs of the queue active at once; resolves to how many fields were added (BullMQ's HSET count). */
export async function setGlobalConcurrency(q: QueueCore, concurrency: number): Promise<number> {
  checkInteger('concurrency', concurrency, { min: 1, max: MOST })
  q.assertOpen()
  return q.call('set the global concurrency of queue', () => setConcurrency(q.client, q.keys, concurrency))
}

/** At most `max` jobs started in any `duration` ms, over each worker's own limiter (BullMQ's). */
export async function setGlobalRateLimit(q: QueueCore, max: number, duration: number): Promise<number> {
  checkInteger('max', max, { min: 1, max: MOST })
  checkInteger('duration', duration, { min: 1, max: MOST, unit: 'ms' })
  q.assertOpen()
  return q.call('set the global rate limit of queue', () => setRateLimit(q.client, q.keys, max, duration))
}

export async function removeGlobalConcurrency(q: QueueCore): Promise<number> {
  q.assertOpen()
  return q.call('remove the global concurrency of queue', () => removeGlobalLimit(q.client, q.keys, 'concurrency'))
}

export async function removeGlobalRateLimit(q: QueueCore): Promise<number> {
  q.assertOpen()
  return q.call('remove the global rate limit of queue', () => removeGlobalLimit(q.client, q.keys, 'rateLimit'))
}

/** The global concurrency, or null when none is set. */
export async function getGlobalConcurrency(q: QueueCore): Promise<number | null> {
  q.assertOpen()
  return (await q.call('read the global concurrency of queue', () => globalLimits(q.client, q.keys))).concurrency
}

/** The global rate limit, or null when none is set. */
export async function getGlobalRateLimit(q: QueueCore): Promise<{ max: number; duration: number } | null> {
  q.assertOpen()
  const { max, duration } = await q.call('read the global rate limit of queue', () => globalLimits(q.client, q.keys))
  return max !== null && duration !== null ? { max, duration } : null
}

/** Whether the queue has as many jobs active as its global concurrency allows (false without one). */
export async function isMaxed(q: QueueCore): Promise<boolean> {
  q.assertOpen()
  const [{ concurrency }, active] = await q.call('read the global concurrency of queue', () =>
    Promise.all([globalLimits(q.client, q.keys), stateSize(q.client, q.keys, 'active')]),
  )
  return concurrency !== null && active >= concurrency
}
