/**
 * Job schedulers, read with plain commands: a scheduler as stored, the due ones, pages of ids.
 */
import type { RedisClient } from './connection.js'
import { parseIteration } from './iteration-id.js'
import type { QueueKeys } from './keys.js'

/** A job scheduler as stored: its hash, its next period and its newest run's due time (ms). */
export interface StoredScheduler {
  hash: Record<string, string>
  next: number
  last: number
}

/** A scheduler as stored (undefined: no such scheduler). */
export async function readScheduler(client: RedisClient, keys: QueueKeys, id: string): Promise<StoredScheduler | undefined> {
  const [hash, next] = await Promise.all([client.hgetall(keys.scheduler(id)), client.zscore(keys.schedulers, id)])
  if (next === null) return undefined
  // A scheduler stored before `last` existed always had its next run made (lua/includes/iteration.lua).
  return { hash, next: Number(next), last: Number(hash.last ?? next) }
}

/** Ids of the job schedulers whose next period is due by `now` (Redis's clock, ms), soonest first. */
export function dueSchedulers(client: RedisClient, keys: QueueKeys, now: number, limit: number): Promise<string[]> {
  return client.zrangebyscore(keys.schedulers, '-inf', now, 'LIMIT', 0, limit)
}

/** A page of scheduler ids by when their next period is due (`asc`: soonest first). */
export function schedulerIds(client: RedisClient, keys: QueueKeys, start: number, end: number, asc: boolean): Promise<string[]> {
  return asc
    ? client.zrange(keys.schedulers, String(start), String(end))
    : client.zrange(keys.schedulers, String(start), String(end), 'REV')
}

/** How many job schedulers the queue has. */
export function schedulerCount(client: RedisClient, keys: QueueKeys): Promise<number> {
  return client.zcard(keys.schedulers)
}

/**
 * Of `ids`, those that are a job scheduler's pending run (its newest, the scheduler's `last`): what drain keeps,
 * as BullMQ's. A read of each scheduler named, only for ids shaped as a run's.
 */
export async function pendingRuns(client: RedisClient, keys: QueueKeys, ids: string[]): Promise<Set<string>> {
  const runs = ids.flatMap((id) => {
    const run = parseIteration(id)
    return run ? [{ id, ...run }] : []
  })
  // A scheduler stored before `last` existed had its next run made: its next period is its pending run's.
  const lasts = await Promise.all(
    runs.map(async (r) => (await client.hget(keys.scheduler(r.schedulerId), 'last')) ?? client.zscore(keys.schedulers, r.schedulerId)),
  )
  return new Set(runs.filter((r, i) => lasts[i] === String(r.due)).map((r) => r.id))
}
