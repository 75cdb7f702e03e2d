/**
 * `echomq stats` and `echomq inspect`: read-only views of queues, read through lib/read-model.ts (the
 * dashboard's read model too): counts, jobs by state, and a lease's time left and a job's stall mark (the
 * library has no call for either).
 */

import type { Queue, QueueCounts } from '../../lib/queue.js'
import { isEmpty, jobsIn, LIST_ORDER, type QueueState, queueState, readLeases } from '../../lib/read-model.js'
import type { RedisClient } from '../../lib/redis/connection.js'
import { serverTimeMs } from '../../lib/redis/queries.js'
import { registeredQueues } from '../../lib/registry.js'
import { oneLine, table } from '../format.js'
import { dueIn, unknownQueue } from './job-lists.js'

/** Counts per queue: the registered ones, or those named (each must be registered or hold jobs, as for `inspect`). */
export async function stats(
  client: RedisClient,
  prefix: string,
  queues: string[] | undefined,
): Promise<Record<string, QueueCounts & { paused: boolean }>> {
  const registered = await registeredQueues(client, prefix)
  const out: Record<string, QueueCounts & { paused: boolean }> = {}
  for (const q of queues ?? registered) {
    const { counts, paused }: QueueState = await queueState(client, prefix, q)
    if (!registered.includes(q) && isEmpty(counts)) throw unknownQueue(q, prefix)
    out[q] = { ...counts, paused }
  }
  return out
}

interface InFlight {
  id: string
  name: string
  leaseMsLeft: number | null
  marked: boolean
  attemptsMade: number
  attempts: number
  /** The worker that took the job (its `name` option). */
  workerName: string | null
}

interface DelayedJob {
  id: string
  name: string
  /** ms until it is due, by Redis's clock (0: due, waiting to be promoted). */
  dueInMs: number
  attemptsMade: number
  attempts: number
  /** The error of its last attempt, when it is a retry in backoff. */
  lastError: string | null
}

interface FailedJob {
  id: string
  name: string
  failedReason: string
  attemptsMade: number
  attempts: number
  finishedOn: number | null
  workerName: string | null
}

export interface Inspection {
  counts: QueueCounts
  inFlight: InFlight[]
  delayed: DelayedJob[]
  failed: FailedJob[]
}

/** The `limit` in-flight jobs with the earliest lease deadlines, the `limit` delayed jobs due first, and the `limit` most recent failures. */
export async function inspect(queue: Queue, limit: number): Promise<Inspection> {
  const [counts, active, delayed, failed, now] = await Promise.all([
    queue.counts(),
    jobsIn(queue, 'active', 0, limit),
    jobsIn(queue, 'delayed', 0, limit),
    jobsIn(queue, 'failed', 0, limit),
    serverTimeMs(queue.client),
  ])
  const leases = await readLeases(
    queue,
    active.map((job) => job.id),
  )
  const inFlight = active.map((job, i): InFlight => {
    const lease = leases[i]
    return {
      id: job.id,
      name: job.name,
      leaseMsLeft: lease?.msLeft ?? null,
      marked: lease?.markedAt !== undefined,
      attemptsMade: job.attemptsMade,
      attempts: job.attempts,
      workerName: job.workerName ?? null,
    }
  })
  return {
    counts,
    inFlight,
    delayed: delayed.map((job) => ({
      id: job.id,
      name: job.name,
      dueInMs: Math.max(0, (job.dueAt ?? now) - now),
      attemptsMade: job.attemptsMade,
      attempts: job.attempts,
      lastError: job.lastError ?? null,
    })),
    failed: failed.map((job) => ({
      id: job.id,
      name: job.name,
      failedReason: job.failedReason ?? '',
      attemptsMade: job.attemptsMade,
      attempts: job.attempts,
      finishedOn: job.finishedOn ?? null,
      workerName: job.workerName ?? null,
    })),
  }
}

export function renderInspection(queue: string, result: Inspection): string {
  const c = result.counts
  const counts =
    `wait ${c.wait}, prioritized ${c.prioritized}, delayed ${c.delayed}, ` +
    `active ${c.active}, stalled ${c.stalled}, completed ${c.completed}, failed ${c.failed}`
  const inFlight = table(
    ['job', 'name', 'worker', 'lease', 'marked', 'attempts'],
    result.inFlight.map((j) => [
      j.id,
      j.name,
      j.workerName ?? '',
      j.leaseMsLeft === null ? 'lapsed' : `${j.leaseMsLeft} ms left`,
      j.marked ? 'yes' : 'no',
      `${j.attemptsMade}/${j.attempts}`,
    ]),
  )
  const delayed = table(
    ['job', 'name', 'due in', 'attempts', 'last error'],
    result.delayed.map((j) => [j.id, j.name, dueIn(j.dueInMs), `${j.attemptsMade}/${j.attempts}`, oneLine(j.lastError ?? '')]),
  )
  const failed = table(
    ['job', 'name', 'worker', 'attempts', 'reason'],
    result.failed.map((j) => [j.id, j.name, j.workerName ?? '', `${j.attemptsMade}/${j.attempts}`, oneLine(j.failedReason)]),
  )
  return [
    `${queue}: ${counts}\n`,
    `in flight (${LIST_ORDER.active})`,
    inFlight,
    `\ndelayed (${LIST_ORDER.delayed})`,
    delayed,
    `\nfailed (${LIST_ORDER.failed})`,
    failed,
  ].join('\n')
}
