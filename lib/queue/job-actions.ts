/**
 * What a Queue does to one job, or to chosen jobs, by id: progress and log lines (unfenced: no run owns
 * the job here), retryJobs, promoteJob, remove and removeJob. Inputs are validated before any Redis call.
 */

import { EchoMQError } from '../errors.js'
import { deliverHandoffs } from '../flows/handoffs.js'
import { removeJob as removeFlowJob } from '../flows/removal.js'
import type { Job, JobState } from '../job.js'
import type { JobProgress } from '../listeners.js'
import { flag, validateJobId } from '../options.js'
import * as commands from '../redis/commands.js'
import { failedUpTo, firstDelayed, newestFailedScore, readJob } from '../redis/queries.js'
import { parseIteration, promoteIterationNow } from '../schedulers/iterations.js'
import { checkInteger, checkKnown, describe, fail, opt } from '../validate.js'
import type { QueueCore } from './core.js'
import { MAX_JOBS_PER_CALL } from './getters.js'

/** Failed jobs sent back per script call when retryJobs walks `failed`. */
const RETRY_BATCH = 100

/** Records a job's progress (a `progress` event here and in QueueEvents), as BullMQ's updateJobProgress. */
export async function updateJobProgress(q: QueueCore, jobId: string, progress: JobProgress): Promise<void> {
  q.assertOpen()
  validateJobId(jobId)
  await q.scope.updateProgress({ id: jobId } as Job, progress, undefined)
}

/** Appends a line to a job's log (BullMQ's addJobLog); the job's own keepLogs bounds it. */
export async function addJobLog(q: QueueCore, jobId: string, logRow: string): Promise<number> {
  q.assertOpen()
  validateJobId(jobId)
  return q.scope.log({ id: jobId } as Job, logRow, undefined)
}

/** retryJobs' options: EchoMQ's `ids` or `limit`, BullMQ 6.7's `count`, `state` and `timestamp`, and `resetAttemptsMade`. */
export interface RetryJobsOptions {
  ids?: string[]
  limit?: number
  /** BullMQ's: jobs per script call (every failed job is retried); EchoMQ sends RETRY_BATCH a call whatever it is. */
  count?: number
  /** BullMQ's: only 'failed' (a completed job is added again, not retried: ERR_JOB_STATE). */
  state?: 'failed'
  /** BullMQ's: only jobs that failed at or before this time (ms since the epoch). */
  timestamp?: number
  /** A fresh attempts budget (the dashboard's and the CLI's retry); BullMQ keeps attemptsMade. */
  resetAttemptsMade?: boolean
}

/**
 * Sends failed jobs back to `wait`, keeping their history (the last error in `lastError`, all runs in
 * `attemptsStarted`) and, as BullMQ's, their attemptsMade (a job that used its attempts runs once more)
 * unless `resetAttemptsMade`. `ids`: those jobs, every one of which must be failed (else ERR_JOB_STATE and
 * nothing changes); otherwise the oldest failed jobs (failed by `timestamp`), at most `limit` (all).
 * Resolves to the ids moved.
 */
export async function retryJobs(q: QueueCore, options?: RetryJobsOptions): Promise<string[]> {
  q.assertOpen()
  const o = checkKnown('retryJobs', options, ['ids', 'limit', 'count', 'state', 'timestamp', 'resetAttemptsMade'])
  if (o.ids !== undefined && (o.limit !== undefined || o.timestamp !== undefined))
    fail('ERR_OPTIONS', 'retryJobs takes ids, or limit and timestamp, not both')
  if (o.state === 'completed') fail('ERR_JOB_STATE', 'retryJobs retries failed jobs only: add a completed job again to run it again')
  if (o.state !== undefined && o.state !== 'failed') fail('ERR_OPTIONS', `expected state to be 'failed', got: ${describe(o.state)}`)
  opt(o.count, 0, (v) => checkInteger('count', v, { min: 1, max: Number.MAX_SAFE_INTEGER }))
  const fresh = opt(o.resetAttemptsMade, false, flag('resetAttemptsMade'))
  if (o.ids !== undefined) return retryNamed(q, o.ids, fresh)
  const limit = opt(o.limit, Number.POSITIVE_INFINITY, (v) => checkInteger('limit', v, { min: 1, max: Number.MAX_SAFE_INTEGER }))
  const before = opt(o.timestamp, Number.POSITIVE_INFINITY, (v) => checkInteger('timestamp', v, { min: 0, max: Number.MAX_SAFE_INTEGER }))
  return retryOldest(q, limit, before, fresh)
}

/** The jobs of `ids`, every one of which must be failed (else ERR_JOB_STATE and nothing changes). */
async function retryNamed(q: QueueCore, given: unknown, fresh: boolean): Promise<string[]> {
  if (!Array.isArray(given) || given.length === 0 || given.length > MAX_JOBS_PER_CALL) {
    fail('ERR_OPTIONS', `expected ids to be an array of 1-${MAX_JOBS_PER_CALL} job ids, got: ${describe(given)}`)
  }
  const ids = [...new Set(given.map((id) => validateJobId(id)))]
  const { moved, notFailed } = await q.call('retry failed jobs of queue', async () => {
    const reply = await commands.retry(q.client, q.keys, ids, true, Number.POSITIVE_INFINITY, fresh)
    await tellParents(q, reply.handoffs)
    return reply
  })
  if (notFailed?.state === 'missing') {
    throw new EchoMQError('ERR_JOB_MISSING', `job ${notFailed.id} of queue ${q.name} does not exist; nothing was retried`)
  }
  if (notFailed !== undefined) {
    throw new EchoMQError('ERR_JOB_STATE', `job ${notFailed.id} of queue ${q.name} is ${notFailed.state}, not failed; nothing was retried`)
  }
  return moved
}

/**
 * A flow's children retried are their parents' pending dependencies again (lib/flows/handoffs.ts): told
 * before the call resolves, as BullMQ's retry changes the parent in the same step.
 */
async function tellParents(q: QueueCore, handoffs: [string, string][]): Promise<void> {
  if (handoffs.length > 0) await deliverHandoffs(q.client, q.keys, handoffs)
}

/** The oldest failed jobs that failed by `before` (ms), at most `limit`. */
async function retryOldest(q: QueueCore, limit: number, before: number, fresh: boolean): Promise<string[]> {
  // Only the jobs failed when the call began, each once: with workers failing them again meanwhile (the
  // downstream is still down), re-reading `failed` from its start would send them back over and over.
  const newest = await q.call('retry failed jobs of queue', () => newestFailedScore(q.client, q.keys))
  if (newest === undefined) return []
  // A score is the failure's ms plus a fraction: a job that failed at `before` has a score under before + 1.
  const bound = Math.min(newest, before + 1 - 2 ** -12)
  const moved = new Set<string>()
  // Jobs this call retried that failed again within the same millisecond as `bound` are still in range:
  // stepped over, not retried twice.
  let skip = 0
  while (moved.size < limit) {
    const n = Math.min(RETRY_BATCH, limit - moved.size)
    const batch = await q.call('retry failed jobs of queue', async () => {
      const read = await failedUpTo(q.client, q.keys, bound, skip, n)
      const ids = read.filter((id) => !moved.has(id))
      skip += read.length - ids.length
      if (read.length === 0) return undefined
      if (ids.length === 0) return []
      const reply = await commands.retry(q.client, q.keys, ids, false, bound, fresh)
      await tellParents(q, reply.handoffs)
      return reply.moved
    })
    if (batch === undefined) break
    for (const id of batch) moved.add(id)
  }
  return [...moved]
}

/**
 * Moves a delayed job (a delayed add, or a retry waiting its backoff) to the back of `wait` now, due or
 * not (BullMQ's job.promote()). ERR_JOB_MISSING when there is no such job, ERR_JOB_STATE when it is not
 * delayed; nothing changes then.
 */
export async function promoteJob(q: QueueCore, id: string): Promise<void> {
  q.assertOpen()
  validateJobId(id)
  const outcome = await q.call('promote a job of queue', () => promoteOne(q, id))
  if (outcome === 'missing') throw new EchoMQError('ERR_JOB_MISSING', `job ${id} of queue ${q.name} does not exist: nothing promoted`)
  if (outcome !== 'promoted')
    throw new EchoMQError('ERR_JOB_STATE', `job ${id} of queue ${q.name} is ${outcome}, not delayed: nothing promoted`)
}

/** Promotes a delayed job: 'promoted', else the state it is in ('missing' when there is none). */
async function promoteOne(q: QueueCore, id: string): Promise<string> {
  if (!parseIteration(id)) return commands.promoteJob(q.client, q.keys, id)
  // A scheduler's pending run moves its schedule on as it leaves `delayed`, as when it falls due.
  if (await promoteIterationNow(q.client, q.keys, id)) return 'promoted'
  return ((await readJob(q.client, q.keys, id)).state as JobState | undefined) ?? 'missing'
}

/**
 * Every delayed job to `wait` now, due or not (BullMQ's promoteJobs): `count` at a time (1,000, each its
 * own script call, sent together), until none is left.
 */
export async function promoteJobs(q: QueueCore, opts?: unknown): Promise<void> {
  q.assertOpen()
  const o = checkKnown('promoteJobs', opts, ['count'])
  const count = opt(o.count, MAX_JOBS_PER_CALL, (v) => checkInteger('count', v, { min: 1, max: MAX_JOBS_PER_CALL }))
  // Ids that stay delayed (not promotable, or left meanwhile) are stepped over: the walk ends at the set's end.
  for (let skip = 0; ; ) {
    const ids = await q.call('read the delayed jobs of queue', () => firstDelayed(q.client, q.keys, count, skip))
    if (ids.length === 0) return
    const outcomes = await q.call('promote the delayed jobs of queue', () => Promise.all(ids.map((id) => promoteOne(q, id))))
    skip += outcomes.filter((o) => o !== 'promoted').length
  }
}

/**
 * Removes a job that is not in flight, with its log, as BullMQ's remove: resolves to 1, or to 0 when the
 * job, or a pending job of its tree (`removeChildren`, the default), is in flight (BullMQ: locked) and
 * nothing was removed. An id with no job resolves to 1, as in BullMQ (nothing was locked); `removed` is
 * emitted on this Queue for a 1. removeJob says more.
 */
export async function remove(q: QueueCore, id: string, opts?: { removeChildren?: boolean }): Promise<0 | 1> {
  const o = checkKnown('remove', opts, ['removeChildren'])
  const outcome = await removeOutcome(q, id, o.removeChildren !== false)
  if (outcome === 'active' || outcome === 'tree-active') return 0
  q.emitter.emit('removed', id)
  return 1
}

/** EchoMQ's remove: whether there was such a job; ERR_JOB_ACTIVE (nothing removed) for one in flight, or a tree with one. */
export async function removeJob(q: QueueCore, id: string): Promise<boolean> {
  const outcome = await removeOutcome(q, id)
  if (outcome === 'active') throw new EchoMQError('ERR_JOB_ACTIVE', `job ${id} of queue ${q.name} is in flight; it was not removed`)
  if (outcome === 'tree-active')
    throw new EchoMQError('ERR_JOB_ACTIVE', `job ${id} of queue ${q.name} has a job of its tree in flight; nothing was removed`)
  if (outcome === 'removed') q.emitter.emit('removed', id)
  return outcome === 'removed'
}

async function removeOutcome(q: QueueCore, id: string, removeChildren = true): Promise<Awaited<ReturnType<typeof removeFlowJob>>> {
  q.assertOpen()
  validateJobId(id)
  return q.call('remove a job of queue', () => removeFlowJob(q.client, q.keys, id, removeChildren))
}
