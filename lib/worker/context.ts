/**
 * RunContext: the one interface the worker's parts act through (worker/taking.ts, running.ts,
 * finishing.ts, finish-batch.ts, closing.ts, events.ts, job-scope.ts, rate-limit.ts): the worker's state
 * (its phase, its runs, the jobs in hand and in flight, the limiter's hold), its helpers, and how it tells
 * its listeners. WorkerCore (worker/core.ts) is the one implementation, which the public Worker makes;
 * the parts import this interface only, so none of them depends on the class that wires them.
 */
import type { EchoMQError } from '../errors.js'
import type { Job, JobScope } from '../job.js'
import type { Untyped } from '../listeners.js'
import type { WorkerSettings } from '../options.js'
import type { Queue } from '../queue.js'
import type { FinishRun, RunOutcome, Taken } from '../redis/commands.js'
import type { Connection, RedisClient } from '../redis/connection.js'
import type { QueueKeys } from '../redis/keys.js'
import type { Trimmer } from '../retention.js'
import type { Batcher } from './batcher.js'
import type { Hand } from './hand.js'
import type { InFlight } from './in-flight.js'
import type { LockManager } from './lock-manager.js'
import type { Promoter } from './promoter.js'
import type { StalledChecker } from './stalled-checker.js'
import type { TakeAhead } from './take-ahead.js'

/**
 * Internal events (symbols, so no BullMQ program meets them) for the worker-function handler (lib/lambda/):
 * IDLE when a take found nothing ready and the worker is about to block on the marker; a listener that
 * closes the worker then keeps it from blocking at all. HANDED_BACK (n) when n jobs set aside and not
 * started (reserved, in hand, or taken by a reply that came after close() began) went back, no attempt used.
 */
export const IDLE: unique symbol = Symbol('echomq.worker.idle')
export const HANDED_BACK: unique symbol = Symbol('echomq.worker.handedBack')
/**
 * An internal Worker option (keyed by this symbol, so no BullMQ program sets it): the most jobs the worker
 * starts in its life. The worker-function handler gives its maxJobs: the worker then takes, reserves and
 * reads into its hand no job it could not start, rather than hand the surplus back when it stops.
 */
export const MAX_STARTS: unique symbol = Symbol('echomq.worker.maxStarts')
/**
 * An internal Worker option (true): the finishes of all its slots go in one call, one call out at a time
 * (a Worker's default is half its slots a call, two out at once, so the worker and Redis work side by side).
 * The worker-function handler sets it: a function is billed by what its jobs cost Redis, and each finish
 * call's fixed part (the script's preamble, its reads of the queue's state, its sixteen keys) is then
 * shared by twice the jobs (at concurrency 10: about 8 jobs a call rather than 4.5).
 */
export const FINISH_TOGETHER: unique symbol = Symbol('echomq.worker.finishTogether')

/**
 * BullMQ's processor: (job, token, signal). The token is the run's (job.token too); the signal aborts on a
 * lost lease or a forced close. BullMQ's type parameters: data, result and job names (`any`, `any`,
 * `string` when not given, as in BullMQ).
 */
export type Processor<Data = Untyped, Result = Untyped, Name extends string = string> = (
  job: Job<Data, Result, Name>,
  token: string,
  signal: AbortSignal,
) => Promise<Result> | Result

/** How a run's finish call ended, and when. */
export type FinishOutcome = RunOutcome & {
  finishedOn: number
  /** A flow's child: settles once its parent knows its outcome (or the delivery failed: a sweep retries it). */
  delivered?: Promise<void>
}

/**
 * A run's phase, as close() sees it: `running` and `finishing` ones are waited for; `lost` ones are no
 * longer this worker's; `abandoned` ones close() gave up on (their outcome is not recorded); `moved` ones
 * ended with job.moveToDelayed (their job is in `delayed`, no finish follows).
 */
export type RunPhase = 'running' | 'finishing' | 'lost' | 'abandoned' | 'moved'

/**
 * A run: `running` (the processor has the job), `finishing` (its finish call is in flight: that call's
 * reply, not a heartbeat racing it, says whether it was accepted), `lost` (its lease was lost; the signal
 * is aborted and the worker told once), `abandoned` (close() gave up on it), `moved` (job.moveToDelayed
 * ended it: its job is in `delayed`, no finish follows); see worker/closing.ts.
 */
export interface Run {
  job: Job
  token: string
  /** Its finish reads only the token (Taken.plain). */
  plain: boolean
  /**
   * Its job is a flow's parent (Taken.parent; or it became one while it ran, as its first finish call said):
   * a finish that may remove it sends its flow keys.
   */
  parent: boolean
  /** Made only for a processor that declares its `signal` parameter (creating one costs a few µs a job). */
  controller: AbortController | undefined
  /** close() aborted its processor: a failure it then reports goes back in line, no attempt used. */
  aborted?: boolean
  done: Promise<void>
  phase: RunPhase
}

/** `running`; `draining` (close() was called: no new jobs, running ones may finish); `abandoning`
 * (close(true), or closeTimeout passed: running processors are aborted, and those still running given up
 * on); `closed` (close() returned: failures of calls still unanswered are summed up, not reported one by one). */
export type WorkerPhase = 'running' | 'draining' | 'abandoning' | 'closed'

/** A job taken (or read into the hand: `scored` and `reservedAt` then say what its reservation was). */
export type Started = Taken & { sentAt: number; scored?: boolean; reservedAt?: number }

/** What a Worker emits besides `error` (BullMQ's names and arguments). */
export type WorkerEvent =
  | 'active'
  | 'progress'
  | 'completed'
  | 'failed'
  | 'lockLost'
  | 'drained'
  | 'paused'
  | 'resumed'
  | 'ready'
  | 'closing'
  | 'closed'
  | 'stalled'

export interface RunContext {
  /** The Worker: where events go. */
  readonly emitter: { emit(event: string | symbol, ...args: unknown[]): boolean; listenerCount(event: string): number }
  readonly name: string
  /** Random (96 bits); each run's token is `<id>:<start number>`. */
  readonly id: string
  readonly processor: Processor
  readonly settings: WorkerSettings
  readonly keys: QueueKeys
  readonly conn: Connection
  /** The connection the idle worker blocks on (the marker). */
  readonly blocking: RedisClient
  readonly runs: Map<string, Run>
  phase: WorkerPhase
  /** Cuts a nap short (a run ended, close() was called). */
  wake: (() => void) | undefined
  /** Settles stopSignal. */
  stopped: () => void
  /** Settles on close(): a blocking call on a client that is reconnecting never settles once disconnect()ed. */
  readonly stopSignal: Promise<void>
  /** Settles once the blocking client's socket closed (ioredis keeps a timer until then). */
  blockingEnded: Promise<unknown>
  /** The processor declares its `signal` parameter: each run gets an AbortController. */
  readonly wantsSignal: boolean
  /** Calls in flight: close() waits for them, since a finish may have taken a job. */
  readonly calls: InFlight
  readonly locks: LockManager
  readonly takeAhead: TakeAhead
  readonly promoter: Promoter
  readonly trimmer: Trimmer
  /** The worker's stalled sweep (none with skipStalledCheck). */
  readonly stalledChecker: StalledChecker
  /** The finishes of one tick, sent together (see worker/batcher.ts). */
  readonly finishes: Batcher<FinishRun, FinishOutcome>
  /** Jobs read and reserved, not taken until they start (worker/hand.ts). */
  readonly hand: Hand<Started>
  /** What the jobs a processor is given act through: progress and log lines fenced by the run's token. */
  readonly scope: JobScope
  /** close(true): do not wait for running jobs. */
  force: boolean
  /** Until when (this worker's clock) the limiter, or queue.rateLimit, holds new starts back. */
  heldUntil: number
  /** The last reply said the queue runs as many jobs as its global concurrency allows (MAXED). */
  maxed: boolean
  /** Processors running now, or about to run (at most concurrency). */
  processing: number
  /** Jobs the take or finish calls in flight are taking, each for a slot free now. */
  incoming: number
  /** Jobs the worker may still start (MAX_STARTS less those started; infinite without it). */
  startsLeft: number
  /** worker.pause(): no job is taken until resume(). */
  pausedLocally: boolean
  /** A job started since the worker last found the queue empty (for the `drained` event). */
  hadWork: boolean
  /** The Queue a job's own remove(), retry(), promote() and getState() go through, made when first used. */
  jobQueue: Queue | undefined
  /** The take loop (worker/taking.ts), which close() waits for: it may be waiting on a take over a stalled link. */
  loopDone: Promise<void>
  /** Stops listening to the connection (worker/events.ts). */
  unwatch: () => void
  /** A reply said the limiter (or queue.rateLimit) holds starts back for `ms` (-1: paused); ids peeked at are forgotten. */
  hold(ms: number): void
  /** The run's lease is gone: its signal is aborted, the worker told once ('lockLost'). */
  lockLost(jobId: string, reason: string, run?: Run): void
  /** n jobs set aside went back unstarted (the HANDED_BACK event); returns n. */
  handedBack(n: number): number
  /** Sleeps until a run ends, close() is called, or `ms` passes: true when `ms` passed. */
  nap(ms?: number): Promise<boolean>
  /** Emits to the application's listeners; a listener that throws is reported, never left to break a run. */
  notify(event: WorkerEvent, ...args: unknown[]): void
  /** A failed call as an EchoMQError, naming the connection's last error (the host, ECONNREFUSED...). */
  failure(what: string, err: unknown): EchoMQError
  /** An `error` event (console.error with no listener); nothing once closed. */
  report(err: unknown): void
}
