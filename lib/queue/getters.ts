/**
 * The getters as BullMQ users write them: `getJobs(types, start, end, asc)` with Redis-style ranks
 * (negative from the end: 0, -1 is every job) and `getJobCounts(...types)`, with BullMQ's type names:
 * 'waiting' is 'wait', 'paused' is the waiting jobs of a paused queue (and then 'waiting' is 0, as in
 * BullMQ 5, where a paused queue's jobs sit in a paused list), 'waiting-children' is always 0 (EchoMQ has
 * no flows), 'prioritized' the waiting jobs with a priority. Types are validated here, before any Redis call.
 */
import type { JobState } from '../job.js'
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'
import { isPaused, pageIds, stateSize } from '../redis/queries.js'
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

/** The state a type reads, given whether the queue is paused; undefined when it holds nothing. */
function stateOf(type: JobType, paused: boolean): JobState | undefined {
  switch (type) {
    case 'wait':
    case 'waiting':
      return paused ? undefined : 'wait'
    case 'paused':
      return paused ? 'wait' : undefined
    case 'waiting-children':
      return undefined
    default:
      return type
  }
}

/** Counts per type, keyed as asked. */
export async function countTypes(client: RedisClient, keys: QueueKeys, types: JobType[]): Promise<Record<string, number>> {
  const paused = types.some((t) => t === 'wait' || t === 'waiting' || t === 'paused') ? await isPaused(client, keys) : false
  const sizes = await Promise.all(
    types.map((t) => {
      const state = stateOf(t, paused)
      return state === undefined ? 0 : stateSize(client, keys, state)
    }),
  )
  return Object.fromEntries(types.map((t, i) => [t, sizes[i] ?? 0]))
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
  const paused = await isPaused(client, keys)
  const states = [...new Set(types.map((t) => stateOf(t, paused)).filter((s): s is JobState => s !== undefined))]
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
