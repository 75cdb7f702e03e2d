/**
 * createWorkerHandler: a Lambda handler that runs a queue's jobs with a Worker (lib/worker.ts) for one
 * invocation, then leaves nothing running, since Lambda freezes the process between invocations.
 *
 * An invocation takes jobs, leased as any Worker takes them, until
 *   - `drained`: a take found nothing ready (the Worker's IDLE: it would block on the marker next);
 *   - `deadline`: the function's remaining time fell below jobTimeoutMs + reserveMs;
 *   - `maxJobs`: it started the most jobs it may (the option, or the event's lower one);
 * then takes nothing more: closing the Worker hands back every job set aside and not started (no attempt
 * used), lets running jobs end, and returns `{ processed, completed, failed, handedBack, reason, ms }`.
 *
 * A job runs at most jobTimeoutMs, and never past the function's deadline less reserveMs: when its time
 * is up its signal is aborted and the run fails with ERR_TIMEOUT, which gives up the lease at once and
 * uses an attempt (back to wait or delayed by its backoff, or failed when none is left), so a job that
 * never fits is not retried for ever. Its processor, if it ignores the signal, may still end later: that
 * late end changes nothing (its progress and log writes are refused, fenced by the run's token).
 * A function killed or frozen while holding jobs is a dead worker: its leases lapse, the sweep recovers
 * the jobs, and a thawed run's finish is refused as any lost lease's.
 *
 * Freeze-safe: when the returned promise settles the Worker is closed (no heartbeat, promoter, hand or
 * guard timer; the blocking connection is never opened: IDLE stops the Worker before it would block) and
 * the invocation's mark has left; the container's connection stays open, idle, for the next invocation.
 */
import { randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import { EchoMQError, RateLimitError, redisError } from '../errors.js'
import type { Job } from '../job.js'
import { validateQueueName } from '../options.js'
import { queueKeys } from '../redis/keys.js'
import { FINISH_TOGETHER, HANDED_BACK, IDLE, MAX_STARTS, type Processor, Worker } from '../worker.js'
import { WorkerConnection } from './connection.js'
import { parseWorkerEvent } from './event.js'
import { InvocationMark } from './invocation.js'
import { type WorkerHandlerOptions, type WorkerHandlerSettings, workerHandlerSettings } from './options.js'

/** What the handler reads of Lambda's context (Lambda's own Context fits it). */
export interface WorkerContext {
  getRemainingTimeInMillis(): number
  readonly awsRequestId?: string
}

export type StopReason = 'drained' | 'deadline' | 'maxJobs'

export interface WorkerInvocationResult {
  queue: string
  /** Jobs whose processor ran in this invocation. */
  processed: number
  completed: number
  /** Runs that failed (an attempt used; retried or failed as the job's attempts say), timeouts included. */
  failed: number
  /** Jobs set aside and not started, back where they were with no attempt used. */
  handedBack: number
  reason: StopReason
  ms: number
}

export type WorkerHandler = ((event: unknown, context: WorkerContext) => Promise<WorkerInvocationResult>) & {
  /** Ends the container's connection (tests, local runs). */
  close(): Promise<void>
}

/** A job of a processor given up for lost time: how long the finish of its run may take besides. */
const CLOSE_EXTRA_MS = 500

export function createWorkerHandler<Data = unknown, Result = unknown>(
  queueName: string,
  processor: Processor<Data, Result>,
  options?: WorkerHandlerOptions,
): WorkerHandler {
  validateQueueName(queueName)
  if (typeof processor !== 'function') throw new EchoMQError('ERR_OPTIONS', 'expected processor to be a function')
  const settings = workerHandlerSettings(options)
  const connection = new WorkerConnection(settings.worker.connection)
  const handler = async (event: unknown, context: WorkerContext): Promise<WorkerInvocationResult> => {
    const parsed = parseWorkerEvent(event, queueName)
    if (typeof context?.getRemainingTimeInMillis !== 'function') {
      throw new EchoMQError('ERR_EVENT', 'expected a Lambda context with getRemainingTimeInMillis()')
    }
    const queue = queueName
    const maxJobs = Math.min(parsed.maxJobs ?? Number.POSITIVE_INFINITY, settings.maxJobs ?? Number.POSITIVE_INFINITY)
    try {
      return await invoke(queue, processor as Processor, settings, connection, context, maxJobs, parsed.invocation)
    } catch (err) {
      if (err instanceof EchoMQError && err.code === 'ERR_CONNECTION') connection.discard()
      throw err
    }
  }
  return Object.assign(handler, { close: () => connection.close() })
}

async function invoke(
  queue: string,
  processor: Processor,
  settings: WorkerHandlerSettings,
  connection: WorkerConnection,
  context: WorkerContext,
  maxJobs: number,
  invocationId: string | undefined,
): Promise<WorkerInvocationResult> {
  const { clock, prefix, lockDuration } = settings.worker
  const begun = clock.now()
  const { jobTimeoutMs, reserveMs } = settings
  const left = () => context.getRemainingTimeInMillis() - reserveMs
  const result = { queue, processed: 0, completed: 0, failed: 0, handedBack: 0 }
  if (left() < jobTimeoutMs) {
    // Too little time to take a job: the reaper's entry for this invocation (if any) is left to lapse.
    warnNoTime(queue, context.getRemainingTimeInMillis(), jobTimeoutMs, reserveMs)
    return { ...result, reason: 'deadline', ms: clock.now() - begun }
  }

  const client = await connection.client()
  const keys = queueKeys(prefix, queue)
  const id = invocationId ?? context.awsRequestId ?? randomBytes(9).toString('base64url')
  const errors: unknown[] = []
  const mark = new InvocationMark(client, keys, id, lockDuration, clock, (err) => errors.push(err))
  await enter(mark, settings.redisTimeoutMs, clock, connection.where, queue)

  let reason: StopReason | undefined
  let started = 0
  let worker: Worker | undefined
  let deadlineTimer: unknown
  const stop = (why: StopReason) => {
    if (reason !== undefined) return
    reason = why
    clock.clearTimeout(deadlineTimer)
    void worker?.close()
  }
  const watchDeadline = () => {
    const slack = left() - jobTimeoutMs
    if (slack <= 0) stop('deadline')
    else deadlineTimer = clock.setTimeout(watchDeadline, slack)
  }

  const run = async (job: Job, token: string, signal: AbortSignal): Promise<unknown> => {
    // A job that starts after the stop (from the hand, or a take in flight): back to the front, no attempt used.
    if (reason !== undefined || started >= maxJobs) {
      result.handedBack++
      throw new RateLimitError()
    }
    started++
    result.processed++
    if (started >= maxJobs) stop('maxJobs')
    return runBounded(processor, job, token, signal, Math.min(jobTimeoutMs, left()), clock)
  }

  worker = new Worker(queue, run, {
    connection: client,
    prefix,
    name: `${settings.worker.name}:${id}`,
    concurrency: settings.worker.concurrency,
    lockDuration,
    heartbeatInterval: settings.worker.heartbeatInterval,
    closeTimeout: jobTimeoutMs + CLOSE_EXTRA_MS,
    // The reaper that starts worker functions sweeps the queue: an invocation does not.
    skipStalledCheck: true,
    clock,
    ...(settings.worker.limiter ? { limiter: settings.worker.limiter } : {}),
    // No job past maxJobs is taken only to be handed back; its finishes go in as few calls as its slots allow.
    ...{ [FINISH_TOGETHER]: true, ...(Number.isFinite(maxJobs) ? { [MAX_STARTS]: maxJobs } : {}) },
  })
  worker.on('error', (err) => errors.push(err))
  worker.on('completed', () => result.completed++)
  worker.on('failed', (_job, err) => {
    // A job handed back after the stop is released, not failed; only real runs count.
    if (!(err instanceof RateLimitError)) result.failed++
  })
  worker.on(HANDED_BACK, (n: number) => (result.handedBack += n))
  worker.on(IDLE, () => stop('drained'))
  watchDeadline()
  try {
    await new Promise<void>((resolve) => worker?.once('closed', () => resolve()))
  } finally {
    clock.clearTimeout(deadlineTimer)
    await mark.leave()
  }
  for (const err of errors) console.error(`[echomq] worker function for queue ${queue}:`, (err as Error)?.message ?? err)
  return { ...result, reason: reason ?? 'drained', ms: Math.round(clock.now() - begun) }
}

/** Said out loud: a function whose timeout is shorter than this would never run a job at all. */
function warnNoTime(queue: string, remainingMs: number, jobTimeoutMs: number, reserveMs: number): void {
  console.warn(
    `[echomq] worker function for queue ${queue} took no job: ${remainingMs} ms left, less than jobTimeoutMs ` +
      `(${jobTimeoutMs}) + reserveMs (${reserveMs}); give the function a longer timeout or a lower jobTimeoutMs`,
  )
}

/** Marks the invocation in Redis (the reaper counts it), within `timeoutMs`; an unreachable Redis is ERR_CONNECTION. */
async function enter(mark: InvocationMark, timeoutMs: number, clock: Clock, where: string, queue: string): Promise<void> {
  await bounded(mark.enter(), timeoutMs, clock).catch((err) => {
    throw new EchoMQError('ERR_CONNECTION', `${where} is unreachable: ${(err as Error).message}`, {
      cause: redisError(queue, 'enter a worker invocation of queue', err),
    })
  })
}

/** The processor, given up after `limitMs`: its signal aborted, the run failed with ERR_TIMEOUT. */
async function runBounded(
  processor: Processor,
  job: Job,
  token: string,
  signal: AbortSignal,
  limitMs: number,
  clock: WorkerHandlerSettings['worker']['clock'],
): Promise<unknown> {
  const controller = new AbortController()
  const forward = () => controller.abort(signal.reason)
  signal?.addEventListener('abort', forward, { once: true })
  let timer: unknown
  const timedOut = new Promise<never>((_, reject) => {
    timer = clock.setTimeout(
      () => {
        const err = new EchoMQError(
          'ERR_TIMEOUT',
          `job ${job.id} ran past ${Math.max(0, Math.round(limitMs))} ms (jobTimeoutMs, or the function's time left less reserveMs)`,
        )
        controller.abort(err)
        reject(err)
      },
      Math.max(0, limitMs),
    )
  })
  try {
    return await Promise.race([Promise.resolve().then(() => processor(job, token, controller.signal)), timedOut])
  } finally {
    clock.clearTimeout(timer)
    signal?.removeEventListener('abort', forward)
  }
}

async function bounded<T>(work: Promise<T>, ms: number, clock: WorkerHandlerSettings['worker']['clock']): Promise<T> {
  let timer: unknown
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = clock.setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
      }),
    ])
  } finally {
    clock.clearTimeout(timer)
  }
}
