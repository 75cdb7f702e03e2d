/**
 * The getters as BullMQ users write them: `getJobs(types, start, end, asc)` with Redis-style ranks
 * (negative from the end: 0, -1 is every job) and `getJobCounts(...types)`, with BullMQ 6.7's type names
 * and counts: 'waiting' is 'wait', the waiting jobs without a priority, paused or not; 'prioritized' those
 * with one; 'active' every job in flight, marked stalled or not; 'paused' is always 0 (BullMQ 5's list of
 * a paused queue's jobs: BullMQ 6 leaves them waiting, and keeps the list only for data from BullMQ 5);
 * 'waiting-children' the parents of flows waiting for their children (lib/flows/). The counts of one call are one snapshot, as BullMQ's
 * (one script there, one MULTI here). Types are validated here, before any Redis call. The Queue's
 * getters and counts (getJob, getJobs, getRanges, getJobCounts, getMetrics, getJobLogs, getJobState) live here.
 */
import { redisError } from '../errors.js'
import { type BullJobState, JOB_STATES, type Job, type JobState, jobFromHash, type QueueCounts, type StoredState } from '../job.js'
import { MAX_PRIORITY } from '../job-options.js'
import { validateJobId } from '../options.js'
import type { RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'
import {
  idsIn,
  jobState,
  pageIds,
  readCounts,
  readCountsPerPriority,
  readJob,
  readJobs,
  readLogs,
  stateSize,
  waitingChildrenCount,
} from '../redis/queries.js'
import { checkInteger, checkKnown, describe, fail, opt } from '../validate.js'
import { checkRank, type QueueCore } from './core.js'
import { checkMetricsArgs, type Metrics, readMetrics } from './metrics.js'

/** The type names getJobs and getJobCounts take. */
const JOB_TYPES = ['wait', 'waiting', 'paused', 'prioritized', 'active', 'delayed', 'completed', 'failed', 'waiting-children'] as const
export type JobType = (typeof JOB_TYPES)[number]

/** getJobCounts()'s types when none is given: BullMQ 6's. */
const DEFAULT_COUNT_TYPES: JobType[] = ['active', 'completed', 'delayed', 'failed', 'prioritized', 'waiting', 'waiting-children']

/** Most jobs one getJobs call returns: page with start and end beyond it. */
const MAX_JOBS_PER_PAGE = 10_000

function jobTypes(types: unknown, what: string): JobType[] {
  const list = types === undefined ? [] : Array.isArray(types) ? types : [types]
  for (const t of list) {
    if (!JOB_TYPES.includes(t as JobType)) fail('ERR_OPTIONS', `expected ${what} to be one of ${JOB_TYPES.join(', ')}, got: ${describe(t)}`)
  }
  return [...new Set(list as JobType[])]
}

/** The state a type lists; undefined when it holds nothing. */
function stateOf(type: JobType): StoredState | undefined {
  switch (type) {
    case 'waiting':
      return 'wait'
    case 'paused':
      return undefined
    default:
      return type
  }
}

/** A type's count, from counts that count each job once. */
function countOf(type: JobType, c: QueueCounts & { waitingChildren: number }): number {
  switch (type) {
    case 'wait':
    case 'waiting':
      return c.wait
    case 'active':
      return c.active + c.stalled
    case 'waiting-children':
      return c.waitingChildren
    case 'paused':
      return 0
    default:
      return c[type]
  }
}

/** Counts per type, keyed as asked, from one snapshot. */
async function countTypes(client: RedisClient, keys: QueueKeys, types: JobType[]): Promise<Record<string, number>> {
  const [counts, waitingChildren] = await Promise.all([
    readCounts(client, keys),
    types.includes('waiting-children') ? waitingChildrenCount(client, keys) : 0,
  ])
  return Object.fromEntries(types.map((t) => [t, countOf(t, { ...counts, waitingChildren })]))
}

/**
 * The ids of a page over `types`, concatenated in type order, each type ranked BullMQ's way (see
 * pageIds), then `start`..`end` of the whole (inclusive, negative from the end), without repeats.
 */
async function idsOfTypes(
  client: RedisClient,
  keys: QueueKeys,
  types: JobType[],
  start: number,
  end: number,
  asc: boolean,
): Promise<string[]> {
  const states = [...new Set(types.map(stateOf).filter((s): s is StoredState => s !== undefined))]
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

/** Most jobs one getJobs call returns (the options form), and most ids one retryJobs call names. */
export const MAX_JOBS_PER_CALL = 1_000
/** getJobs' types when none is given: every type that lists jobs. */
const ALL_TYPES: JobType[] = ['active', 'completed', 'delayed', 'failed', 'prioritized', 'waiting']

/** The job, or undefined when there is none (as BullMQ). */
export async function getJob(q: QueueCore, id: string): Promise<Job | undefined> {
  q.assertOpen()
  validateJobId(id)
  const hash = await q.call('read job of queue', () => readJob(q.client, q.keys, id))
  return Object.keys(hash).length === 0 ? undefined : jobFromHash(id, hash, q.scope)
}

/** getJobs, both forms (see Queue.getJobs). */
export async function getJobs(q: QueueCore, types: unknown, start: unknown, end: unknown, asc: unknown): Promise<Job[]> {
  q.assertOpen()
  if (typeof start === 'object' && start !== null) return page(q, types, start)
  const list = jobTypes(types, 'getJobs types')
  const from = opt(start, 0, (v) => checkRank('start', v))
  const to = opt(end, -1, (v) => checkRank('end', v))
  const ascending = opt(asc, false, (v) => {
    if (typeof v !== 'boolean') fail('ERR_OPTIONS', `expected asc to be true or false, got: ${describe(v)}`)
    return v
  })
  const all = list.length > 0 ? list : ALL_TYPES
  const ids = await q.call('list jobs of queue', () => idsOfTypes(q.client, q.keys, all, from, to, ascending))
  return jobsOf(q, ids)
}

/** The ids getJobs would read (BullMQ's getRanges): the same types, ranks and order, without the jobs. */
export async function getRanges(q: QueueCore, types: unknown, start: number, end: number, asc: boolean): Promise<string[]> {
  q.assertOpen()
  const list = jobTypes(types, 'getRanges types')
  checkRank('start', start)
  checkRank('end', end)
  const all = list.length > 0 ? list : ALL_TYPES
  return q.call('list job ids of queue', () => idsOfTypes(q.client, q.keys, all, start, end, asc === true))
}

/** Counts per type, keyed as asked (BullMQ's getJobCounts; none: BullMQ 6's default types). */
export async function getJobCounts(q: QueueCore, types: unknown[]): Promise<Record<string, number>> {
  q.assertOpen()
  const list = jobTypes(types, 'getJobCounts types')
  return q.call('count jobs of queue', () => countTypes(q.client, q.keys, list.length > 0 ? list : DEFAULT_COUNT_TYPES))
}

/** The sum of getJobCounts over `types` (none: BullMQ 6's default types). */
export async function getJobCountByTypes(q: QueueCore, types: unknown[]): Promise<number> {
  const counts = await getJobCounts(q, jobTypes(types, 'getJobCountByTypes types'))
  return Object.values(counts).reduce((a, b) => a + b, 0)
}

/** Waiting jobs of each priority asked for, keyed by it (BullMQ's getCountsPerPriority; 0: those without one). */
export async function getCountsPerPriority(q: QueueCore, priorities: unknown): Promise<Record<string, number>> {
  q.assertOpen()
  if (!Array.isArray(priorities) || priorities.length > MAX_JOBS_PER_CALL)
    fail('ERR_OPTIONS', `expected priorities to be an array of at most ${MAX_JOBS_PER_CALL} priorities, got: ${describe(priorities)}`)
  const list = [...new Set(priorities.map((p) => checkInteger('priority', p, { min: 0, max: MAX_PRIORITY })))]
  const counts = await q.call('count jobs per priority of queue', () => readCountsPerPriority(q.client, q.keys, list))
  return Object.fromEntries(list.map((p, i) => [String(p), counts[i] ?? 0]))
}

/** Finished jobs per minute, BullMQ's shape (see queue/metrics.ts). */
export async function getMetrics(q: QueueCore, type: 'completed' | 'failed', start: number, end: number): Promise<Metrics> {
  q.assertOpen()
  checkMetricsArgs(type, start, end)
  return q.call('read the metrics of queue', () => readMetrics(q.client, q.keys, type, start, end))
}

/** A job's log lines, `start`..`end` (inclusive; negative from the end), oldest first unless `asc` is false. */
export async function getJobLogs(q: QueueCore, id: string, start: number, end: number, asc: boolean) {
  q.assertOpen()
  validateJobId(id)
  checkRank('start', start)
  checkRank('end', end)
  // Newest first: the same ranks counted from the end, then reversed.
  const [from, to] = asc ? [start, end] : [-(end + 1), -(start + 1)]
  const [logs, count] = await q.call('read the log of a job of queue', () => readLogs(q.client, q.keys, id, from, to))
  return { logs: asc ? logs : logs.reverse(), count }
}

/** A job's state now, under BullMQ's names: `waiting` for `wait`, `unknown` when there is no such job. */
export async function getJobState(q: QueueCore, id: string): Promise<BullJobState> {
  q.assertOpen()
  validateJobId(id)
  const state = await q.call('read the state of a job of queue', () => jobState(q.client, q.keys, id))
  return state === undefined ? 'unknown' : state === 'wait' ? 'waiting' : state
}

/** EchoMQ's counts per state, one snapshot. */
export async function counts(q: QueueCore): Promise<QueueCounts> {
  q.assertOpen()
  return q.call('count jobs of queue', () => readCounts(q.client, q.keys))
}

/** A queue's counts, on a client the caller holds (the command's): see readCounts. */
export async function queueCounts(client: RedisClient, keys: QueueKeys, queue: string): Promise<QueueCounts> {
  try {
    return await readCounts(client, keys)
  } catch (err) {
    throw redisError(queue, 'count jobs of queue', err)
  }
}

/** getJobs' options form: a page of one state (see getJobs). */
async function page(q: QueueCore, state: unknown, range: { start?: number; end?: number }): Promise<Job[]> {
  const s = state === 'waiting' ? 'wait' : state
  if (!JOB_STATES.includes(s as JobState)) fail('ERR_OPTIONS', `expected a state, one of ${JOB_STATES.join(', ')}, got: ${describe(state)}`)
  const r = checkKnown('getJobs', range, ['start', 'end'])
  const start = opt(r.start, 0, (v) => checkInteger('start', v, { min: 0, max: Number.MAX_SAFE_INTEGER }))
  const end = opt(r.end, start + 99, (v) => checkInteger('end', v, { min: start, max: start + MAX_JOBS_PER_CALL - 1 }))
  const ids = await q.call(`list ${String(s)} jobs of queue`, () => idsIn(q.client, q.keys, s as JobState, start, end))
  return jobsOf(q, ids)
}

/** The jobs of `ids` that still exist, in order. */
async function jobsOf(q: QueueCore, ids: string[]): Promise<Job[]> {
  const hashes = await q.call('read jobs of queue', () => readJobs(q.client, q.keys, ids))
  return ids.flatMap((id, i) => {
    const hash = hashes[i] ?? {}
    return Object.keys(hash).length === 0 ? [] : [jobFromHash(id, hash, q.scope)]
  })
}
