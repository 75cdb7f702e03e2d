/**
 * Finishing a job by hand, with BullMQ 6.7's names: `job.moveToCompleted(returnValue, token, fetchNext)` and
 * `job.moveToFailed(err, token, fetchNext)`, for jobs taken with `worker.getNextJob(token)` (a Worker made
 * with no processor). Each is the finish a Worker's run makes (lua/finish-16.lua), fenced by the run's token:
 * a token that does not hold the job changes nothing and is refused with a typed EchoMQError. A failure uses
 * an attempt as a processor's throw does (retried after the job's backoff, or failed when none is left; an
 * UnrecoverableError fails it at once). What the finish leaves to do is done before the call returns: a
 * finished set past its retention is trimmed, a flow child's parent is told.
 *
 * With `fetchNext`, the next ready job is then taken under the same token (a Worker's job only: its lease is
 * the worker's lockDuration, not renewed, as BullMQ's manual jobs; a refused finish takes none): BullMQ's
 * `[jobData, jobId, 0, 0]`, where jobData is the job's JSON (BullMQ gives its raw hash); `[]` when none was
 * ready, without fetchNext, and for a failure retried at once (back in `wait`: BullMQ takes none then).
 */
import { EchoMQError } from './errors.js'
import { deliverHandoffs } from './flows/handoffs.js'
import { type Job, Job as JobClass, type JobScope, type JobState } from './job.js'
import type { JobFields } from './job-fields.js'
import { toJson } from './json.js'
import { type BackoffStrategy, DEFAULTS } from './options.js'
import * as commands from './redis/commands.js'
import type { RedisClient } from './redis/connection.js'
import type { QueueKeys } from './redis/keys.js'
import { rateLimitTtl, readBackoffType } from './redis/queries.js'
import { trimFinished } from './retention.js'
import { failedAttempt, failureOf, stacksAfter, strategyRetry } from './worker/failure.js'

/** What moveToCompleted and moveToFailed resolve to: BullMQ's shape, the next job's JSON first; [] for none. */
export type NextJobData = [ReturnType<Job['toJSON']>, string, number, number] | []

export interface JobFinishes {
  complete(job: Job, result: unknown, token: string | undefined, fetchNext: boolean): Promise<NextJobData>
  fail(job: Job, err: unknown, token: string | undefined, fetchNext: boolean): Promise<NextJobData>
  /** Back to the front of the line, no attempt used (BullMQ's moveToWait): the rate limit's hold (ms), else 0. */
  release(job: Job, token: string | undefined): Promise<number>
}

export interface JobFinishesContext {
  client: RedisClient
  keys: QueueKeys
  queue: string
  call: <T>(what: string, fn: () => Promise<T>) => Promise<T>
  /** Takes the next ready job under `token`, if any (a Worker's scope); undefined: fetchNext takes nothing. */
  next?: (token: string) => Promise<Job | undefined>
  /** The worker's removeOnComplete (true) / removeOnFail (false), encoded, for a job with none of its own. */
  keep?: (completed: boolean) => string | undefined
  /** The worker's settings.backoffStrategy, for a job whose backoff type is a custom one. */
  backoffStrategy?: BackoffStrategy | undefined
}

export function jobFinishes(ctx: JobFinishesContext): JobFinishes {
  const { client, keys, queue, call } = ctx

  async function finishOne(
    job: Job,
    token: string | undefined,
    request: Omit<commands.FinishRun, 'run'>,
    fetchNext: boolean,
  ): Promise<NextJobData> {
    const keep = request.action === 'release' ? undefined : ctx.keep?.(request.action === 'complete')
    const run: commands.FinishRun = { run: { id: job.id, token: token ?? '' }, ...request, ...(keep === undefined ? {} : { keep }) }
    const what = `finish job ${job.id} of queue`
    const { reply } = await commands.sendAsAsked(
      run,
      (r) => call(what, () => commands.finishRuns(client, keys, [r])),
      (r) => r.runs[0],
    )
    const outcome = reply.runs[0] as commands.RunOutcome
    if (outcome.status !== 'ok') throw refused(queue, job, outcome.state, token)
    // The finish is recorded: what is left to do may fail without undoing it (the queue's next trim or sweep
    // does it then: a trim, the parent's hand-off entry left in the outbox).
    const trim = outcome.trim
    if (trim) await trimFinished(client, keys, trim, outcome.oldest, true).catch(() => undefined)
    if (outcome.handoff !== undefined) await deliverHandoffs(client, keys, [[job.id, outcome.handoff]]).catch(() => undefined)
    job.state = outcome.state as JobState
    if (request.action !== 'release') job.attemptsMade += 1
    if (outcome.state === 'completed' || outcome.state === 'failed') job.finishedOn = reply.finishedOn
    if (outcome.backoffMs !== undefined) job.delay = outcome.backoffMs
    // As BullMQ's: a job retried at once takes nothing next (the next job would be itself).
    if (!fetchNext || outcome.state === 'wait' || outcome.state === 'prioritized') return []
    // Taken after the finish, not in its call: a finish refused must take nothing (the job it took would be held by no one).
    const base = job.token ?? token
    const next = base && ctx.next ? await ctx.next(base) : undefined
    return next ? [next.toJSON(), next.id, 0, 0] : []
  }

  return {
    async release(job, token) {
      await finishOne(job, token, { action: 'release', value: '' }, false)
      // As BullMQ's moveToWait: how long the queue's rate limit holds starts back (ms), 0 for none.
      return Math.max(0, await call('read the rate limit of queue', () => rateLimitTtl(client, keys)))
    },
    async complete(job, result, token, fetchNext) {
      const value = result === undefined ? 'null' : toJson(result, 'its result', DEFAULTS.maxDataBytes)
      const reply = await finishOne(job, token, { action: 'complete', value }, fetchNext)
      job.returnValue = result
      return reply
    },
    async fail(job, err, token, fetchNext) {
      const { action, reason, stack } = failureOf(err)
      const readType = () => call('read the backoff of a job of queue', () => readBackoffType(client, keys, job.id))
      const retry = action === 'fail' ? await strategyRetry(ctx.backoffStrategy, job, err, readType) : undefined
      const stacks = stacksAfter(job, stack)
      const request: Omit<commands.FinishRun, 'run'> = {
        // A rate-limit or moved error has no meaning here: the job is failed as given.
        action: retry === 'final' ? 'fail-final' : action === 'release' ? 'fail' : action,
        value: reason,
        stacks: stacks ? JSON.stringify(stacks) : '',
        ...(typeof retry === 'number' ? { delayMs: retry } : {}),
      }
      const reply = await finishOne(job, token, request, fetchNext)
      failedAttempt(job, reason, stacks, job.state)
      return reply
    },
  }
}

/** Why a finish by hand changed nothing, as a typed error. */
function refused(queue: string, job: Job, state: string, token: string | undefined): EchoMQError {
  if (state === 'missing')
    return new EchoMQError('ERR_JOB_MISSING', `job ${job.id} of queue ${queue} no longer exists: it was not finished`)
  if (state !== 'active')
    return new EchoMQError(
      'ERR_JOB_STATE',
      `job ${job.id} of queue ${queue} is not in the active state (it is ${state}): it was not finished`,
    )
  const why = token ? 'the token given does not hold it' : 'no token was given, and the job was not taken by this process'
  return new EchoMQError('ERR_LOCK_LOST', `job ${job.id} of queue ${queue}: ${why}; it was not finished`)
}

/** BullMQ's names a job's JSON adds (toJSON), accessors on a Job: left out of the fields a Job is made of. */
const JSON_ONLY = new Set(['returnvalue', 'timestamp', 'processedOn', 'delay', 'queueQualifiedName', 'processedBy'])

/**
 * Job.fromJSON(owner, json, jobId): a Job of a job's JSON (a string or the object, as moveToCompleted's fetchNext
 * gives it) acting through the Queue or Worker `owner` (its methods need one). ERR_OPTIONS when `json` is not a job's.
 */
export function jobFromJSON(owner: unknown, json: unknown, jobId?: string): Job {
  let data: unknown = json
  if (typeof json === 'string') {
    try {
      data = JSON.parse(json)
    } catch {
      data = undefined
    }
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data))
    throw new EchoMQError('ERR_OPTIONS', "expected Job.fromJSON's json to be a job's JSON (moveToCompleted's fetchNext gives one)")
  const fields = Object.fromEntries(Object.entries(data).filter(([name]) => !JSON_ONLY.has(name)))
  const returnValue = (data as { returnvalue?: unknown }).returnvalue
  if (fields.returnValue === undefined && returnValue !== undefined && returnValue !== null) fields.returnValue = returnValue
  const scope = (owner as { core?: { scope?: JobScope } } | null)?.core?.scope
  return new JobClass({ ...fields, id: jobId ?? String(fields.id) } as unknown as JobFields, scope)
}
