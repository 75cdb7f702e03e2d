/**
 * Changing a job in place, with BullMQ 6.7's names and meaning: `job.updateData(data)`,
 * `job.changePriority({ priority, lifo })`, `job.moveToDelayed(timestamp, token)` (with DelayedError),
 * `job.changeDelay(delay)` and `job.extendLock(token, duration)`. Each is one script (lib/redis/commands.ts); input is validated before
 * it, and a refused call (no such job, not in flight, a run that lost its lease) changes nothing and says
 * why with a typed EchoMQError. moveToDelayed and extendLock are fenced by the run's token, as in BullMQ;
 * updateData and changePriority are not (BullMQ's are not either).
 * `job.clearLogs(keepLogs)` too: one command (LTRIM or DEL of the job's log), not fenced, as BullMQ's.
 */
import { EchoMQError } from './errors.js'
import type { Job, JobQueue } from './job.js'
import { DELAY, MAX_PRIORITY } from './job-options.js'
import { toJson } from './json.js'
import * as commands from './redis/commands.js'
import type { RedisClient } from './redis/connection.js'
import { parseIteration } from './redis/iteration-id.js'
import type { QueueKeys } from './redis/keys.js'
import { checkInteger, checkKnown, describe, fail, opt } from './validate.js'

/** What a Job's change methods act through (a Queue's or a Worker's scope). */
export interface JobChanges {
  updateData(job: Job, data: unknown): Promise<void>
  changePriority(job: Job, options: { priority?: number; lifo?: boolean }): Promise<number>
  /** Resolves to when the job is due (ms, Redis's clock when the time asked for had passed). */
  moveToDelayed(job: Job, timestamp: number, token: string): Promise<number>
  /** Resolves to when the delayed job is now due (ms, Redis's clock). */
  changeDelay(job: Job, delay: number): Promise<number>
  extendLock(job: Job, token: string, duration: number): Promise<number>
  /** Releases the job's deduplication id if the job holds it (lib/deduplication.ts). */
  removeDeduplicationKey(job: Job, deduplicationId: string): Promise<boolean>
  /** Clears the job's log, or keeps its newest `keepLogs` lines (0 or undefined: none). */
  clearLogs(job: Job, keepLogs: unknown): Promise<void>
}

export interface JobChangesContext {
  client: RedisClient
  keys: QueueKeys
  queue: string
  /** The largest JSON text accepted as job data (the Queue's maxDataBytes). */
  maxDataBytes: number
  /** Runs a Redis call, turning its failure into an EchoMQError that names the queue. */
  call<T>(what: string, fn: () => Promise<T>): Promise<T>
  /** A run moved its job to `delayed`: the worker ends the run without finishing it (see DelayedError). */
  moved?(id: string, token: string): void
}

/** The longest lease extendLock gives (a day): a longer one hides a dead worker's job from the sweep. */
const MAX_LOCK_MS = 24 * 3_600_000
/** The most log lines clearLogs is asked to keep (as the keepLogs option's bound). */
const MAX_LOG_LINES = 1_000_000_000
/** The latest moveToDelayed accepts: the year 9999 in ms, well inside a double's exact integers. */
const MAX_TIMESTAMP = 253_402_300_799_999

export function jobChanges(ctx: JobChangesContext): JobChanges {
  const { client, keys, queue, call } = ctx
  const missing = (id: string, what: string) => new EchoMQError('ERR_JOB_MISSING', `job ${id} of queue ${queue} does not exist: ${what}`)
  return {
    async updateData(job, data) {
      const json = toJson(data, 'job data', ctx.maxDataBytes, 'maxDataBytes')
      const status = await call('update the data of a job of queue', () => commands.updateData(client, keys, job.id, json))
      if (status === 'missing') throw missing(job.id, 'its data was not updated')
    },
    async changePriority(job, options) {
      const o = checkKnown('changePriority', options, ['priority', 'lifo'])
      const priority = opt(o.priority, 0, (v) => checkInteger('priority', v, { min: 0, max: MAX_PRIORITY }))
      const lifo = opt(o.lifo, false, (v) => {
        if (typeof v !== 'boolean') fail('ERR_OPTIONS', `expected lifo to be true or false, got: ${describe(v)}`)
        return v
      })
      const { status } = await call('change the priority of a job of queue', () =>
        commands.changePriority(client, keys, job.id, priority, lifo),
      )
      if (status === 'missing') throw missing(job.id, 'its priority was not changed')
      return priority
    },
    async moveToDelayed(job, timestamp, token) {
      if (typeof timestamp !== 'number' || !Number.isFinite(timestamp) || timestamp < 0 || timestamp > MAX_TIMESTAMP)
        fail('ERR_OPTIONS', `expected timestamp to be ms since the epoch, from 0 to ${MAX_TIMESTAMP}, got: ${describe(timestamp)}`)
      if (typeof token !== 'string') fail('ERR_OPTIONS', `expected token to be a string, got: ${describe(token)}`)
      const out = await call('move a job to delayed in queue', () =>
        commands.moveToDelayed(client, keys, job.id, token, Math.floor(timestamp)),
      )
      if (out.status === 'ok') {
        ctx.moved?.(job.id, token)
        return out.due
      }
      if (out.status === 'missing') throw missing(job.id, 'it was not moved to delayed')
      if (out.status === 'lost')
        throw new EchoMQError('ERR_LOCK_LOST', `job ${job.id} of queue ${queue}: this run does not hold its lease; it was not moved`)
      throw new EchoMQError('ERR_JOB_STATE', `job ${job.id} of queue ${queue} is ${out.state}, not active: it was not moved to delayed`)
    },
    async changeDelay(job, delay) {
      checkInteger('delay', delay, DELAY)
      // A scheduler's pending run is due when its id says (its schedule moves on then): change the scheduler.
      if (parseIteration(job.id))
        throw new EchoMQError(
          'ERR_JOB_STATE',
          `job ${job.id} of queue ${queue} is a job scheduler's next run: change its schedule (upsertJobScheduler), not its delay`,
        )
      const out = await call('change the delay of a job of queue', () => commands.changeDelay(client, keys, job.id, delay))
      if (out.status === 'ok') return out.due
      if (out.state === 'missing') throw missing(job.id, 'its delay was not changed')
      throw new EchoMQError('ERR_JOB_STATE', `job ${job.id} of queue ${queue} is ${out.state}, not delayed: its delay was not changed`)
    },
    async extendLock(job, token, duration) {
      if (typeof token !== 'string' || token === '') fail('ERR_OPTIONS', `expected token to be a run's token, got: ${describe(token)}`)
      checkInteger('duration', duration, { min: 1, max: MAX_LOCK_MS, unit: 'ms' })
      return call('extend the lease of a job of queue', () => commands.extendLock(client, keys, job.id, token, duration))
    },
    async clearLogs(job, keepLogs) {
      const keep = opt(keepLogs, 0, (v) => checkInteger('keepLogs', v, { min: 0, max: MAX_LOG_LINES }))
      await call('clear the log of a job of queue', () => commands.clearLogs(client, keys, job.id, keep))
    },
    async removeDeduplicationKey(job, deduplicationId) {
      return (
        (await call('release the deduplication id of a job of queue', () => commands.unhold(client, keys, deduplicationId, job.id))) === 1
      )
    },
  }
}

/**
 * job.retry(state, opts): a failed job, or a completed one (`state: 'completed'`), back to `wait`
 * (queue.retryJobs), attemptsMade kept unless `resetAttemptsMade`, as BullMQ's; the Job left as BullMQ's
 * leaves it (failedReason, processedOn, finishedOn, returnvalue null). A job not in `state` is refused
 * (ERR_JOB_STATE, ERR_JOB_MISSING), and so is a completed job that may not be retried (lib/queue/job-actions.ts
 * retryJobs: a flow's child whose parent moved on, a deduplication id another job holds), and
 * `resetAttemptsStarted` (ERR_OPTIONS): each run's token is numbered by its start, so the count goes on.
 */
export async function retryJob(
  job: Job,
  queue: JobQueue,
  state: unknown,
  opts: { resetAttemptsMade?: boolean; resetAttemptsStarted?: boolean },
): Promise<void> {
  if (state !== 'failed' && state !== 'completed')
    fail('ERR_OPTIONS', `job ${job.id}: expected state to be 'failed' or 'completed', got: ${describe(state)}`)
  const o = checkKnown('retry', opts, ['resetAttemptsMade', 'resetAttemptsStarted'])
  if (o.resetAttemptsStarted)
    fail(
      'ERR_OPTIONS',
      `job ${job.id}: resetAttemptsStarted is not supported: each run's token is numbered by its start, so the count goes on`,
    )
  const fresh = o.resetAttemptsMade === true
  await queue.retryJobs({ ids: [job.id], state, ...(fresh ? { resetAttemptsMade: true } : {}) })
  job.state = job.priority > 0 ? 'prioritized' : 'wait'
  if (fresh) job.attemptsMade = 0
  Object.assign(job, { failedReason: null, finishedOn: null, startedOn: null, returnValue: undefined })
}
