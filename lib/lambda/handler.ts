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
 *
 * Round trips: a warm invocation of n jobs at concurrency c makes 2 + ceil(n / c) writes to Redis (each a
 * wake-up of Redis, which costs it kernel time that callgrind's count does not show): the mark with the
 * Worker's first commands (lib/lambda/one-write.ts), the first take, and one finish per c jobs, the last
 * with the leave. It was 6 + ceil(n / c): the mark, the registration and the two reads each on their own
 * write, and the leave after the last finish's reply.
 */
import { randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import { EchoMQError, RateLimitError, redisError } from '../errors.js'
import type { Job } from '../job.js'
import { validateQueueName } from '../options.js'
import type { RedisClient } from '../redis/connection.js'
import { queueKeys } from '../redis/keys.js'
import { FINISH_TOGETHER, HANDED_BACK, IDLE, MAX_STARTS, type Processor, Worker, type WorkerOptions } from '../worker.js'
import { WorkerConnection } from './connection.js'
import { parseWorkerEvent } from './event.js'
import { InvocationMark } from './invocation.js'
import { inOneWrite } from './one-write.js'
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
  const id = invocationId ?? context.awsRequestId ?? randomBytes(9).toString('base64url')
  const errors: unknown[] = []
  const mark = new InvocationMark(client, queueKeys(prefix, queue), id, lockDuration, clock, (err) => errors.push(err))

  let reason: StopReason | undefined
  let refused = false // the mark could not be entered: the invocation fails, and runs nothing a take in flight returns
  let started = 0
  let running = 0 // processors running now (a job handed back never runs one)
  let worker: Worker | undefined
  let deadlineTimer: unknown
  // Once no processor runs and none will start, the invocation leaves, in the write of the last run's finish.
  const leaveIfDone = () => {
    if (reason !== undefined && running === 0) inOneWrite(client, () => void mark.leave())
  }
  const stop = (why: StopReason) => {
    if (reason !== undefined) return
    reason = why
    clock.clearTimeout(deadlineTimer)
    leaveIfDone()
    void worker?.close()
  }
  const watchDeadline = () => {
    const slack = left() - jobTimeoutMs
    if (slack <= 0) stop('deadline')
    else deadlineTimer = clock.setTimeout(watchDeadline, slack)
  }
  const run = async (job: Job, token: string, signal: AbortSignal): Promise<unknown> => {
    // A job that starts after the stop (from the hand, or a take in flight): back to the front, no attempt used.
    if (refused || reason !== undefined || started >= maxJobs) {
      result.handedBack++
      throw new RateLimitError()
    }
    started++
    result.processed++
    running++
    if (started >= maxJobs) stop('maxJobs')
    try {
      return await runBounded(processor, job, token, signal, Math.min(jobTimeoutMs, left()), clock)
    } finally {
      running--
      leaveIfDone()
    }
  }

  // The mark goes in the same write as the Worker's first commands (its registration and its read of
  // candidates), and first: Redis enters it before the Worker can take a job.
  let entering: Promise<void> = Promise.resolve()
  worker = inOneWrite(client, () => {
    entering = enter(mark, settings.redisTimeoutMs, clock, connection, queue)
    return new Worker(queue, run, workerOptions(settings, client, id, maxJobs))
  })
  count(worker, result, errors)
  worker.on(IDLE, () => stop('drained'))
  const closed = new Promise<void>((resolve) => worker?.once('closed', () => resolve()))
  await entered(entering, worker, () => {
    refused = true
  })
  if (reason === undefined) watchDeadline()
  try {
    await closed
  } finally {
    clock.clearTimeout(deadlineTimer)
    await mark.leave()
  }
  for (const err of errors) console.error(`[echomq] worker function for queue ${queue}:`, (err as Error)?.message ?? err)
  return { ...result, reason: reason ?? 'drained', ms: Math.round(clock.now() - begun) }
}

/** The invocation's Worker: the handler's settings, as one run of a function needs them. */
function workerOptions(settings: WorkerHandlerSettings, client: RedisClient, id: string, maxJobs: number): WorkerOptions {
  const { worker, jobTimeoutMs } = settings
  return {
    connection: client,
    prefix: worker.prefix,
    name: `${worker.name}:${id}`,
    concurrency: worker.concurrency,
    lockDuration: worker.lockDuration,
    heartbeatInterval: worker.heartbeatInterval,
    closeTimeout: jobTimeoutMs + CLOSE_EXTRA_MS,
    // The reaper that starts worker functions sweeps the queue: an invocation does not.
    skipStalledCheck: true,
    clock: worker.clock,
    ...(worker.limiter ? { limiter: worker.limiter } : {}),
    // No job past maxJobs is taken only to be handed back; its finishes go in as few calls as its slots allow.
    ...{ [FINISH_TOGETHER]: true, ...(Number.isFinite(maxJobs) ? { [MAX_STARTS]: maxJobs } : {}) },
  }
}

/** The result's counts, from the Worker's events. */
function count(worker: Worker, result: Omit<WorkerInvocationResult, 'reason' | 'ms'>, errors: unknown[]): void {
  worker.on('error', (err) => errors.push(err))
  worker.on('completed', () => result.completed++)
  worker.on('failed', (_job, err) => {
    // A job handed back after the stop is released, not failed; only real runs count.
    if (!(err instanceof RateLimitError)) result.failed++
  })
  worker.on(HANDED_BACK, (n: number) => (result.handedBack += n))
}

/**
 * Waits for the mark. When it could not be entered the invocation fails, after closing the Worker sent with
 * it (`refuse` first: whatever a take in flight returns goes back unstarted), so no timer is left.
 */
async function entered(entering: Promise<void>, worker: Worker, refuse: () => void): Promise<void> {
  try {
    await entering
  } catch (err) {
    refuse()
    await worker.close()
    throw err
  }
}

/** Said out loud: a function whose timeout is shorter than this would never run a job at all. */
function warnNoTime(queue: string, remainingMs: number, jobTimeoutMs: number, reserveMs: number): void {
  console.warn(
    `[echomq] worker function for queue ${queue} took no job: ${remainingMs} ms left, less than jobTimeoutMs ` +
      `(${jobTimeoutMs}) + reserveMs (${reserveMs}); give the function a longer timeout or a lower jobTimeoutMs`,
  )
}

/**
 * Marks the invocation in Redis (the reaper counts it), within `timeoutMs`; an unreachable Redis is
 * ERR_CONNECTION. With no answer in time the connection is dropped at once: the Worker's first commands,
 * sent with the mark and unanswered too, then fail, and its close does not wait for them (nor can a take
 * have gone out: the reads it follows are answered after the mark).
 */
async function enter(mark: InvocationMark, timeoutMs: number, clock: Clock, connection: WorkerConnection, queue: string): Promise<void> {
  const where = connection.where
  await bounded(mark.enter(), timeoutMs, clock).catch((err) => {
    if (err instanceof NoAnswer) connection.discard()
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

/** A call Redis did not answer in time (its connection may still be up: a stalled link). */
class NoAnswer extends Error {}

async function bounded<T>(work: Promise<T>, ms: number, clock: WorkerHandlerSettings['worker']['clock']): Promise<T> {
  let timer: unknown
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = clock.setTimeout(() => reject(new NoAnswer(`no answer within ${ms} ms`)), ms)
      }),
    ])
  } finally {
    clock.clearTimeout(timer)
  }
}
