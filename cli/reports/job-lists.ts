/**
 * `echomq jobs`, `echomq retry` and `echomq remove`: list the jobs in one state, send failed jobs back to
 * `wait`, remove a finished job. Each goes through the library's Queue (getJobs, retryJobs, getJob,
 * remove) over the command's fail-fast client; this module only pages, renders and checks the queue
 * exists. A Queue registers its queue for the reaper when it is created, so `withQueue` opens one only for
 * a queue that is registered or holds jobs: a mistyped name is reported, never added to the registry.
 */

import type { JobFields, JobState } from '../../lib/job.js'
import { Queue } from '../../lib/queue.js'
import { jobsIn, LIST_ORDER, queueExists, unknownQueueText } from '../../lib/read-model.js'
import type { RedisClient } from '../../lib/redis/connection.js'
import { serverTimeMs } from '../../lib/redis/queries.js'
import { CliError } from '../errors.js'
import { oneLine, table } from '../format.js'

export const unknownQueue = (name: string, prefix: string): CliError => new CliError(unknownQueueText(name, prefix))

/** Opens a Queue on `client` for `fn` and closes it after; a queue neither registered nor holding jobs is an error. */
export async function withQueue<T>(client: RedisClient, prefix: string, name: string, fn: (queue: Queue) => Promise<T>): Promise<T> {
  if (!(await queueExists(client, prefix, name))) throw unknownQueue(name, prefix)
  const queue = new Queue(name, { connection: client, prefix })
  try {
    return await fn(queue)
  } finally {
    await queue.close()
  }
}

type ListedJob = JobFields & { dueInMs?: number }

export interface JobList {
  queue: string
  state: JobState
  start: number
  /** Jobs in the state when the list was read. */
  total: number
  jobs: ListedJob[]
}

export async function listJobs(queue: Queue, state: JobState, start: number, limit: number): Promise<JobList> {
  const [jobs, counts, now] = await Promise.all([jobsIn(queue, state, start, limit), queue.counts(), serverTimeMs(queue.client)])
  return {
    queue: queue.name,
    state,
    start,
    total: counts[state],
    jobs: jobs.map((j) => (j.dueAt === undefined ? j : { ...j, dueInMs: Math.max(0, j.dueAt - now) })),
  }
}

const at = (ms: number | undefined) => (ms === undefined ? '' : new Date(ms).toISOString())
export const dueIn = (ms: number | undefined) => (ms === undefined ? '' : ms === 0 ? 'due now' : `${ms} ms`)

export function renderJobList(list: JobList): string {
  const { state, start, total, jobs } = list
  if (jobs.length === 0) return `no ${state} jobs in queue ${list.queue}${start > 0 ? ` from rank ${start}` : ''}`
  const extra: Record<JobState, [string[], (j: ListedJob) => string[]]> = {
    wait: [['last error'], (j) => [oneLine(j.lastError)]],
    prioritized: [['priority', 'last error'], (j) => [String(j.priority ?? ''), oneLine(j.lastError)]],
    delayed: [['due in', 'last error'], (j) => [dueIn(j.dueInMs), oneLine(j.lastError)]],
    active: [['started', 'last error'], (j) => [at(j.startedOn), oneLine(j.lastError)]],
    completed: [['finished'], (j) => [at(j.finishedOn)]],
    failed: [['finished', 'reason'], (j) => [at(j.finishedOn), oneLine(j.failedReason)]],
  }
  const [headers, cells] = extra[state]
  const rows = jobs.map((j) => [j.id, j.name, `${j.attemptsMade}/${j.attempts}`, j.workerName ?? '', ...cells(j)])
  const last = start + jobs.length
  const more = total > last ? `; next page: --start ${last}` : ''
  const footer = `${state} jobs ${start + 1}-${last} of ${total} in queue ${list.queue} (${LIST_ORDER[state]})${more}`
  return `${table(['job', 'name', 'attempts', 'worker', ...headers], rows)}\n\n${footer}`
}

interface DryRunJob {
  id: string
  /** Its state now; null when there is no such job. */
  state: JobState | null
}

export interface RetryReport {
  queue: string
  dryRun: boolean
  /** The ids moved back to `wait`, or with dryRun those a real run would move. */
  retried: string[]
  /** With dryRun and ids: each named job's state. */
  jobs?: DryRunJob[]
}

/** What `retryJobs({ ids })` would do: every job must be failed, else nothing is retried. */
export async function dryRunIds(queue: Queue, ids: string[]): Promise<RetryReport> {
  const jobs = await Promise.all(ids.map(async (id) => ({ id, state: (await queue.getJob(id))?.state ?? null })))
  const blocked = jobs.some((j) => j.state !== 'failed')
  return { queue: queue.name, dryRun: true, retried: blocked ? [] : ids, jobs }
}

/** What `retryJobs({ limit })` would move: the oldest failed jobs (getJobs lists the newest first). */
export async function dryRunAll(queue: Queue, limit: number | undefined): Promise<RetryReport> {
  const failed = (await queue.counts()).failed
  const take = Math.min(limit ?? failed, failed)
  const oldest = await jobsIn(queue, 'failed', failed - take, take)
  return { queue: queue.name, dryRun: true, retried: oldest.map((j) => j.id).reverse() }
}

export function renderRetry(report: RetryReport): string {
  const { queue, retried, jobs } = report
  const ids = retried.map((id) => `  ${id}`).join('\n')
  if (!report.dryRun) {
    if (retried.length === 0) return `no failed jobs to retry in queue ${queue}`
    return `retried ${retried.length} job(s) of queue ${queue}, back in wait with a fresh attempts budget:\n${ids}`
  }
  if (jobs) {
    const verdict = (j: DryRunJob) => (j.state === 'failed' ? 'would retry' : j.state === null ? 'no such job' : 'not failed')
    const rows = jobs.map((j) => [j.id, j.state ?? '', verdict(j)])
    const summary =
      retried.length > 0
        ? `dry run, nothing changed: a real run would retry ${retried.length} job(s)`
        : 'dry run, nothing changed: a real run would retry nothing (every job named must be failed)'
    return `${table(['job', 'state', 'verdict'], rows)}\n\n${summary}`
  }
  if (retried.length === 0) return `dry run: no failed jobs to retry in queue ${queue}`
  return `dry run, nothing changed: would retry ${retried.length} job(s) of queue ${queue} (oldest first):\n${ids}`
}
