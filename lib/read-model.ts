/**
 * The operator's read model, one for the dashboard (lib/ui/read.ts) and the CLI (cli/reports/): whether a
 * queue exists, a queue's counts and paused flag, a state's jobs a page at a time, and each in-flight job's
 * lease. Jobs and counts come from the library's Queue and its count script; what only EchoMQ knows (a
 * lease's time left, a sweep's mark) from lib/redis/queries.ts. Every read is bounded by what is shown.
 *
 * A queue "exists" when it is registered or holds jobs. Opening a Queue registers its name, so both tools
 * ask this first: a mistyped name is reported, never added to the registry.
 */
import type { Job, JobState } from './job.js'
import { MAX_JOBS_PER_CALL, type Queue, type QueueCounts, queueCounts } from './queue.js'
import type { RedisClient } from './redis/connection.js'
import { queueKeys } from './redis/keys.js'
import { inRegistry, isPaused, leaseStates } from './redis/queries.js'

export const isEmpty = (counts: QueueCounts): boolean => Object.values(counts).every((n) => n === 0)

/** The words both tools use for a queue that does not exist. */
export const unknownQueueText = (name: string, prefix: string): string =>
  `no queue "${name}" under prefix "${prefix}": it is not registered and holds no jobs`

/** Registered, or holding jobs (one SMISMEMBER, then the counts only when it is not registered). */
export async function queueExists(client: RedisClient, prefix: string, name: string): Promise<boolean> {
  if ((await inRegistry(client, prefix, [name]))[0]) return true
  return !isEmpty(await queueCounts(client, queueKeys(prefix, name), name))
}

export interface QueueState {
  counts: QueueCounts
  paused: boolean
}

/** A queue's counts and paused flag, read without opening a Queue. */
export async function queueState(client: RedisClient, prefix: string, name: string): Promise<QueueState> {
  const keys = queueKeys(prefix, name)
  const [counts, paused] = await Promise.all([queueCounts(client, keys, name), isPaused(client, keys)])
  return { counts, paused }
}

/**
 * The order jobsIn lists each state in, in the words the dashboard and `echomq jobs` / `inspect` both print:
 * one list, one wording. `wait` is the order the jobs will run (a job sent to the front, `lifo` or recovered
 * from a stall, first). The dashboard's Waiting tab reads BullMQ's getJobs order instead, the reverse:
 * WAIT_REVERSED.
 */
export const LIST_ORDER: Record<JobState, string> = {
  wait: 'next to run first',
  prioritized: 'next to run first: priority 1 first, then by when they were added',
  delayed: 'earliest due first',
  active: 'earliest lease deadline first: lapsed leases on top',
  completed: 'most recently finished first',
  failed: 'most recently finished first',
}

/** The order of the dashboard's Waiting tab (getJobs(['waiting', 'paused'], start, end, false)). */
export const WAIT_REVERSED = 'last to run first'

/** Up to `count` jobs in `state` from rank `start`, in pages of MAX_JOBS_PER_CALL (jobs removed meanwhile are left out). */
export async function jobsIn(queue: Queue, state: JobState, start: number, count: number): Promise<Job[]> {
  const jobs: Job[] = []
  for (let from = start; from < start + count; from += MAX_JOBS_PER_CALL) {
    const page = await queue.getJobs(state, { start: from, end: Math.min(start + count, from + MAX_JOBS_PER_CALL) - 1 })
    if (page.length === 0) break
    jobs.push(...page)
  }
  return jobs
}

export interface Lease {
  /** ms left on the lease (by Redis's clock), or undefined when it is gone (lapsed). */
  msLeft: number | undefined
  /** When a sweep marked the job (ms), undefined if none did. */
  markedAt: number | undefined
}

/** Each in-flight job's lease, in the order of `ids`. */
export async function readLeases(queue: Queue, ids: string[]): Promise<Lease[]> {
  const states = await leaseStates(queue.client, queue.keys, ids)
  return states.map((s) => ({ msLeft: s.ttlMs > 0 ? s.ttlMs : undefined, markedAt: s.markedAt }))
}
