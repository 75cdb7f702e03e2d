/**
 * What a processor's throw becomes, as BullMQ's worker makes it:
 *   - the reason stored (failedReason, lastError) is the thrown value's `message` (BullMQ's `err?.message`);
 *     a value with none (`throw { code: 'E_GATEWAY' }`, a string, undefined) is stored as "null", as
 *     BullMQ stores it, never "[object Object]"; the `failed` event gets the thrown value as it was thrown;
 *   - Worker.RateLimitError: back in line with no attempt used (a DelayedError too: after job.moveToDelayed
 *     the run has ended already, without it the job goes back in line; a WaitingChildrenError the same, after
 *     job.moveToWaitingChildren); UnrecoverableError: failed at once;
 *   - a retry's wait for a job whose backoff type is neither fixed nor exponential (`type: 'custom'`, or
 *     any other name) comes from the worker's settings.backoffStrategy(attemptsMade, type, err, job): its
 *     ms; -1 fails the job instead of retrying (BullMQ's rule); another negative, or not a number, retries at once.
 */
import { isDelayed, isRateLimit, isUnrecoverable, isWaitingChildren, thrownText } from '../errors.js'
import type { Job } from '../job.js'
import type { BackoffStrategy } from '../options.js'
import type { FinishAction } from '../redis/commands.js'

/** Most characters of a processor's error message kept as the job's failedReason / lastError, and of its stack. */
const ERROR_MAX_CHARS = 8_192

const truncate = (text: string, max = ERROR_MAX_CHARS): string => (text.length <= max ? text : `${text.slice(0, max)}… (truncated)`)

export interface Failure {
  action: FinishAction
  reason: string
  stack: string
  /** The run already ended by job.moveToDelayed or job.moveToWaitingChildren says so by this error's name. */
  moved?: 'DelayedError' | 'WaitingChildrenError'
}

/**
 * Never throws: a thrown value can throw in turn when read (a getter on its message, stack or name, a
 * Proxy, a toString that throws). Such a value fails the job like any error, its reason saying what happened,
 * rather than escaping the run (which would leave its slot taken and its job in `active`).
 */
export function failureOf(err: unknown): Failure {
  try {
    const moved = isDelayed(err) ? 'DelayedError' : isWaitingChildren(err) ? 'WaitingChildrenError' : undefined
    const action: FinishAction = isRateLimit(err) || moved ? 'release' : isUnrecoverable(err) ? 'fail-final' : 'fail'
    const e = err as { message?: unknown; stack?: unknown } | null | undefined
    const message = e !== null && e !== undefined && e.message !== undefined ? String(e.message) : 'null'
    const stack = e !== null && e !== undefined && typeof e.stack === 'string' ? e.stack : ''
    return { action, reason: truncate(message), stack: action === 'release' ? '' : truncate(stack), ...(moved ? { moved } : {}) }
  } catch (readErr) {
    return { action: 'fail', reason: truncate(`the processor threw a value that could not be read (${thrownText(readErr)})`), stack: '' }
  }
}

const BUILT_IN = new Set(['fixed', 'exponential'])

/**
 * A failure's retry under the worker's backoffStrategy: the wait (ms), or 'final' for -1; undefined when the
 * job's own backoff decides (no strategy, no backoff, a built-in type, or no attempt left).
 */
async function customRetry(
  strategy: BackoffStrategy | undefined,
  backoffType: string | undefined,
  attemptsMade: number,
  err: unknown,
  job: unknown,
): Promise<number | 'final' | undefined> {
  if (!strategy || backoffType === undefined || BUILT_IN.has(backoffType)) return undefined
  const ms = await strategy(attemptsMade, backoffType, err, job)
  if (ms === -1) return 'final'
  return typeof ms === 'number' && Number.isFinite(ms) && ms > 0 ? Math.round(ms) : 0
}

/**
 * A failure's retry under `strategy` (customRetry) for a job with attempts left, its backoff type read (by
 * `readType`) only then; undefined when the job's own backoff decides.
 */
export async function strategyRetry(
  strategy: BackoffStrategy | undefined,
  job: { attemptsMade: number; attempts: number },
  err: unknown,
  readType: () => Promise<string | undefined>,
): Promise<number | 'final' | undefined> {
  if (!strategy || job.attemptsMade + 1 >= job.attempts) return undefined
  return customRetry(strategy, await readType(), job.attemptsMade + 1, err, job)
}

/**
 * The job's stacktrace once a failed run's stack joins it, the newest opts.stackTraceLimit kept; undefined
 * when it joins none (no stack, or a limit of 0).
 */
export function stacksAfter(job: Job, stack: string): string[] | undefined {
  if (stack === '' || job.opts.stackTraceLimit <= 0) return undefined
  return [...job.stacktrace, stack].slice(-job.opts.stackTraceLimit)
}

/**
 * The job of a failed attempt as its finish stored it (BullMQ's moveToFailed sets the same on its Job): the
 * reason as failedReason (and lastError when retried), and the stacktrace the finish sent to be stored
 * (`stacks`; undefined when the run's stack joined none).
 */
export function failedAttempt(job: Job, reason: string, stacks: string[] | undefined, state: string): void {
  job.failedReason = reason
  if (state !== 'failed') job.lastError = reason
  if (stacks) job.stacktrace = stacks
}
