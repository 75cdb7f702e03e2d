/**
 * The getters as BullMQ users write them: `getJobs(types, start, end, asc)` with Redis-style ranks
 * (negative from the end: 0, -1 is every job) and `getJobCounts(...types)`, with BullMQ 6.7's type names
 * and counts: 'waiting' is 'wait', the waiting jobs without a priority, paused or not; 'prioritized' those
 * with one; 'active' every job in flight, marked stalled or not; 'paused' is always 0 (BullMQ 5's list of
 * a paused queue's jobs: BullMQ 6 leaves them waiting, and keeps the list only for data from BullMQ 5) and
 * 'waiting-children' too (EchoMQ has no flows). The counts of one call are one snapshot, as BullMQ's
 * (one script there, one MULTI here). Types are validated here, before any Redis call.
 */
import type { JobState, QueueCounts } from '../job.js'
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'
import { pageIds, readCounts, stateSize } from '../redis/queries.js'
import { describe, fail } from '../validate.js'

/** The type names getJobs and getJobCounts take. */
export const JOB_TYPES = [
  'wait',
  'waiting',
  'paused',
  'prioritized',
  'active',
  'delayed',
  'completed',
  'failed',
  'waiting-children',
] as const
export type JobType = (typeof JOB_TYPES)[number]

/** getJobCounts()'s types when none is given: BullMQ 6's. */
export const DEFAULT_COUNT_TYPES: JobType[] = ['active', 'completed', 'delayed', 'failed', 'prioritized', 'waiting', 'waiting-children']

/** Most jobs one getJobs call returns: page with start and end beyond it. */
export const MAX_JOBS_PER_PAGE = 10_000

export function jobTypes(types: unknown, what: string): JobType[] {
  const list = types === undefined ? [] : Array.isArray(types) ? types : [types]
  for (const t of list) {
    if (!JOB_TYPES.includes(t as JobType)) fail('ERR_OPTIONS', `expected ${what} to be one of ${JOB_TYPES.join(', ')}, got: ${describe(t)}`)
  }
  return [...new Set(list as JobType[])]
}

/** The state a type lists; undefined when it holds nothing. */
function stateOf(type: JobType): JobState | undefined {
  switch (type) {
    case 'waiting':
      return 'wait'
    case 'paused':
    case 'waiting-children':
      return undefined
    default:
      return type
  }
}

/** A type's count, from counts that count each job once. */
function countOf(type: JobType, c: QueueCounts): number {
  switch (type) {
    case 'wait':
    case 'waiting':
      return c.wait
    case 'active':
      return c.active + c.stalled
    case 'paused':
    case 'waiting-children':
      return 0
    default:
      return c[type]
  }
}

/** Counts per type, keyed as asked, from one snapshot. */
export async function countTypes(client: RedisClient, keys: QueueKeys, types: JobType[]): Promise<Record<string, number>> {
  const counts = await readCounts(client, keys)
  return Object.fromEntries(types.map((t) => [t, countOf(t, counts)]))
}

/**
 * The ids of a page over `types`, concatenated in type order, each type ranked BullMQ's way (see
 * pageIds), then `start`..`end` of the whole (inclusive, negative from the end), without repeats.
 */
export async function idsOfTypes(
  client: RedisClient,
  keys: QueueKeys,
  types: JobType[],
  start: number,
  end: number,
  asc: boolean,
): Promise<string[]> {
  const states = [...new Set(types.map(stateOf).filter((s): s is JobState => s !== undefined))]
  const sizes = await Promise.all(states.map((s) => stateSize(client, keys, s)))
  const total = sizes.reduce((a, b) => a + b, 0)
  const from = Math.max(0, start < 0 ? total + start : start)
  const to = Math.min(total - 1, end < 0 ? total + end : end)
  if (to < from) return []
  if (to - from + 1 > MAX_JOBS_PER_PAGE) {
    fail('ERR_OPTIONS', `getJobs returns at most ${MAX_JOBS_PER_PAGE} jobs a call, asked for ${to - from + 1}: page with start and end`)
  }
  const ids: string[] = []
  let offset = 0
  for (const [i, state] of states.entries()) {
    const size = sizes[i] ?? 0
    const a = Math.max(from - offset, 0)
    const b = Math.min(to - offset, size - 1)
    if (b >= a) ids.push(...(await pageIds(client, keys, state, a, b, asc)))
    offset += size
  }
  return [...new Set(ids)]
}
