/**
 * Worker: takes jobs with a lease, runs the processor, and finishes each job fenced by the run's token.
 * The class is the public surface: it makes one WorkerCore (worker/core.ts) and delegates to the parts of
 * the job's path under worker/: taking.ts (take), running.ts (run a job), finishing.ts and finish-batch.ts
 * (finish), closing.ts (close), stalled-checker.ts, rate-limit.ts, events.ts.
 *
 * Guarantees: at-least-once execution. A job is taken and leased in one script, so a crash never strands
 * it; the LockManager renews every lease on one timer; completing or failing succeeds only while the run
 * still owns the job, so a worker whose job was recovered (or re-taken elsewhere) cannot finish it. An
 * idle worker blocks on the queue's marker key (BZPOPMIN, 60 s), so it does not poll, and only when its
 * last take found nothing ready (a take whose candidates other workers got first reserves others and
 * takes again); a due time in the marker, or in a take or finish reply, hands it delayed jobs to promote
 * when due (worker/promoter.ts). A busy worker takes its next job in the same call that finishes the last
 * one (worker/take-ahead.ts), and holds at most one more, in hand and unleased (worker/hand.ts).
 * close() waits for running jobs (BullMQ's close(); close(true) does not wait), for at most closeTimeout
 * when given (worker/closing.ts); a job still running then is never put back in line while its processor
 * runs. A job a late reply returns after close() began goes back to `wait` unstarted.
 *
 * Options (validated in options.ts): connection, prefix ('emq'), name (<hostname>:<pid>), concurrency (1),
 * lockDuration (30000 ms), heartbeatInterval (half the lease; at most half), closeTimeout (none: wait),
 * limiter ({ max, duration }: at most max starts in any duration ms, across every worker of the queue; a
 * limited worker sleeps until the window has room, asking Redis again after at most maximumRateLimitDelay),
 * stalledInterval (30000 ms) and maxStalledCount (1) or skipStalledCheck (worker/stalled-checker.ts),
 * removeOnComplete / removeOnFail (for jobs with none of their own; age in s), settings.backoffStrategy
 * (worker/failure.ts), autorun (true; false: no job is taken until run()), drainDelay (5 s: getNextJob's
 * wait), maximumRateLimitDelay (30000 ms), clock (monotonic timers; tests inject one). A processor that calls
 * `await worker.rateLimit(ms)` then throws Worker.RateLimitError() returns its job to the front of the line
 * without using an attempt.
 *
 * Events: 'active' (job), 'progress' (job, progress), 'completed' (job, result), 'failed' (job, error;
 * job.state: 'delayed' or 'wait' when it will be retried, 'failed' when not; an UnrecoverableError fails
 * the job at once), 'lockLost' (job, EchoMQError ERR_LOCK_LOST; the processor's signal, when it takes one,
 * is aborted), 'error'.
 */

import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { EchoMQError, RateLimitError } from './errors.js'
import type { Job } from './job.js'
import type { Retention } from './job-options.js'
import type { Untyped, WorkerListener } from './listeners.js'
import { type BackoffStrategy, setting, validateQueueName, type WorkerSettings, workerSettings } from './options.js'
import type { RedisClient } from './redis/connection.js'
import { READY_TIMEOUT_MS, untilReady } from './redis/connection-failure.js'
import type { ConnectionOptions } from './redis/connection-options.js'
import { closeWorker } from './worker/closing.js'
import { FINISH_TOGETHER, type HANDED_BACK, type IDLE, MAX_STARTS, type Processor } from './worker/context.js'
import { WorkerCore } from './worker/core.js'
import { watchConnection } from './worker/events.js'
import { getNextJob } from './worker/manual.js'
import { rateLimit } from './worker/rate-limit.js'
import { RunCycles } from './worker/run-cycles.js'
import { takeLoop } from './worker/taking.js'

export { FINISH_TOGETHER, HANDED_BACK, IDLE, MAX_STARTS, type Processor } from './worker/context.js'

/** The processor of a worker made with none: never run (such a worker starts no loop). */
const byHand: Processor = () => {
  throw new EchoMQError('ERR_OPTIONS', 'this worker takes jobs by hand (getNextJob): it has no processor')
}

/**
 * BullMQ's typed events (WorkerListener): `on('completed', (job, result) => ...)` gets typed arguments;
 * and EchoMQ's internal events (IDLE, HANDED_BACK: symbols, which no BullMQ program names).
 */
export interface Worker<Data = Untyped, Result = Untyped, Name extends string = string> {
  on<U extends keyof WorkerListener<Data, Result, Name>>(event: U, listener: WorkerListener<Data, Result, Name>[U]): this
  on(event: typeof IDLE | typeof HANDED_BACK, listener: (...args: never[]) => void): this
  once<U extends keyof WorkerListener<Data, Result, Name>>(event: U, listener: WorkerListener<Data, Result, Name>[U]): this
  once(event: typeof IDLE | typeof HANDED_BACK, listener: (...args: never[]) => void): this
  off<U extends keyof WorkerListener<Data, Result, Name>>(event: U, listener: WorkerListener<Data, Result, Name>[U]): this
  off(event: typeof IDLE | typeof HANDED_BACK, listener: (...args: never[]) => void): this
}

export interface WorkerOptions {
  connection?: ConnectionOptions | undefined
  prefix?: string
  /** Recorded on every job this worker takes (default `<hostname>:<pid>`). */
  name?: string
  concurrency?: number
  lockDuration?: number
  heartbeatInterval?: number
  /** How long close() waits for running jobs (ms); none by default: until they end, as BullMQ's close(). */
  closeTimeout?: number
  clock?: WorkerSettings['clock']
  limiter?: { max: number; duration: number }
  /** The worker's stalled sweep, every stalledInterval ms (30000), one worker of the queue per interval. */
  stalledInterval?: number
  /** Stalls a job may have and still be recovered (1); past it, the job fails. */
  maxStalledCount?: number
  /** No stalled sweep in this worker (the reaper sweeps). */
  skipStalledCheck?: boolean
  /** For jobs with no retention of their own: BullMQ's KeepJobs (age in seconds). */
  removeOnComplete?: Retention
  removeOnFail?: Retention
  settings?: { backoffStrategy?: BackoffStrategy }
  /** BullMQ's: true (the default) takes jobs from the construction; false from worker.run(). */
  autorun?: boolean
  /** How long getNextJob({ block: true }) waits for a job (s; BullMQ's, 5); a running worker waits on its queue's marker. */
  drainDelay?: number
  /** BullMQ's name for heartbeatInterval (ms); give one of them. */
  lockRenewTime?: number
  /** The longest a rate-limited worker sleeps before it asks Redis again (ms; BullMQ's, 30000). */
  maximumRateLimitDelay?: number
  /**
   * BullMQ's switch to count finished jobs per minute (`maxDataPoints`: MetricsTime). Taken and checked, it
   * changes nothing: every queue keeps those counts over the last hour (queue.getMetrics).
   */
  metrics?: { maxDataPoints?: number }
}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the interface above only types on/once/off (BullMQ's WorkerListener)
export class Worker<Data = Untyped, Result = Untyped, Name extends string = string> extends EventEmitter {
  /** BullMQ's way to make one: `throw Worker.RateLimitError()` (see RateLimitError). */
  static RateLimitError(): RateLimitError {
    return new RateLimitError()
  }

  readonly name: string
  /** Random (96 bits); each run's token is `<id>:<start number>`. */
  readonly id = randomBytes(12).toString('base64url')
  /** The worker's state and helpers, which every part under worker/ acts on. */
  private readonly core: WorkerCore
  private closing: Promise<void> | undefined
  /** BullMQ's runs: from run() (or autorun) until paused with no job running, or closed (worker/run-cycles.ts). */
  private readonly cycles: RunCycles
  /** Made with no processor: jobs are taken with getNextJob only. */
  private readonly manual: boolean
  /** Pauses made: a pause ends the run only if no other came after it. */
  private pauses = 0

  /**
   * `processor` null or undefined makes a worker that takes jobs only by hand (BullMQ's manual processing):
   * worker.getNextJob(token), then job.moveToCompleted / moveToFailed (worker/manual.ts).
   */
  constructor(name: string, processor?: Processor<Data, Result, Name> | null, options?: WorkerOptions) {
    super()
    this.name = validateQueueName(name)
    if (processor !== null && processor !== undefined && typeof processor !== 'function')
      throw new EchoMQError('ERR_OPTIONS', 'expected processor to be a function, or null for a worker that takes jobs by hand')
    const settings: WorkerSettings = workerSettings(options)
    const internal = options as { [MAX_STARTS]?: number; [FINISH_TOGETHER]?: boolean } | undefined
    this.manual = typeof processor !== 'function'
    this.core = new WorkerCore(this, this.name, this.id, (processor ?? byHand) as Processor, settings, {
      maxStarts: internal?.[MAX_STARTS],
      finishTogether: internal?.[FINISH_TOGETHER] === true,
    })
    watchConnection(this.core)
    this.cycles = new RunCycles(() => {
      this.core.locks.start()
      this.core.loopDone = takeLoop(this.core)
      this.core.startStalledCheck()
    })
    if (settings.autorun && !this.manual) void this.cycles.begin()
  }

  /** BullMQ's worker.opts: the settings in force, defaults filled in (a copy: change concurrency on the worker). */
  get opts(): Readonly<WorkerSettings> {
    return Object.freeze({ ...this.core.settings })
  }

  /** BullMQ's: the jobs run at once. Settable: more are taken at once, fewer as runs end (ERR_OPTIONS: not 1..10,000). */
  get concurrency(): number {
    return this.core.settings.concurrency
  }

  set concurrency(n: number) {
    this.core.settings.concurrency = setting('concurrency')(n)
    this.core.wake?.()
  }

  /**
   * BullMQ's worker.getNextJob(token, { block = true }): the next ready job, taken under `token` with a lease of
   * lockDuration that nothing renews (job.extendLock(token, ms) does), finished with job.moveToCompleted or
   * job.moveToFailed; undefined when none is ready (with block, after waiting drainDelay seconds, 5 by default).
   */
  getNextJob(token: string, options?: { block?: boolean }): Promise<Job<Data, Result, Name> | undefined> {
    return getNextJob(this.core, token, options, this.cycles.begun) as Promise<Job<Data, Result, Name> | undefined>
  }

  /**
   * BullMQ's worker.run(), for a Worker made with `autorun: false` (or paused since): takes jobs (its
   * heartbeat, take loop and stalled sweep start with the first run) and resolves once the run ends: the
   * worker closed, or was paused and its jobs ended. While paused or after close() it resolves at once; during
   * a run it rejects with ERR_OPTIONS ("Worker is already running.", BullMQ's words).
   */
  run(): Promise<void> {
    if (this.manual)
      return Promise.reject(
        new EchoMQError('ERR_OPTIONS', `No process function is defined. (worker for queue ${this.name} takes jobs by hand: getNextJob)`),
      )
    if (this.cycles.running) {
      return Promise.reject(
        new EchoMQError('ERR_OPTIONS', `Worker is already running. (queue ${this.name})`, {
          variable: 'autorun',
          hint: 'call run() once, on a Worker made with autorun: false',
        }),
      )
    }
    if (this.closing || this.core.pausedLocally) return Promise.resolve()
    return this.cycles.begin()
  }

  /**
   * BullMQ's worker.cancelJob(jobId, reason): aborts the signal of the job's run in this worker (a processor
   * that takes one, `(job, token, signal)`), with `reason` as `signal.reason`; the processor decides what
   * follows (a throw fails the run as any other). False when this worker runs no such job or its processor
   * takes no signal.
   */
  cancelJob(jobId: string, reason?: string): boolean {
    const run = this.core.runs.get(jobId)
    if (run?.phase !== 'running' || !run.controller) return false
    run.controller.abort(reason)
    return true
  }

  /** BullMQ's worker.cancelAllJobs(reason): cancelJob for every job this worker runs. */
  cancelAllJobs(reason?: string): void {
    for (const id of [...this.core.runs.keys()]) this.cancelJob(id, reason)
  }

  /**
   * BullMQ's worker.rateLimit(ms): holds every worker of the queue back from starting jobs for `ms`; pair it
   * with `throw Worker.RateLimitError()`, which returns the job to the line without using an attempt.
   */
  rateLimit(ms: number): Promise<void> {
    return rateLimit(this.core, ms)
  }

  /**
   * Stops taking jobs and waits for the running ones to end (BullMQ's close()), for at most closeTimeout
   * when given; close(true) does not wait. A processor still running then is aborted and, if it does not
   * return within a short margin, given up on: its job is not put back in line while it runs (its lease
   * lapses and the stalled sweep recovers it). Safe to call more than once.
   */
  close(force = false): Promise<void> {
    if (force) this.core.force = true
    if (!this.closing) {
      this.core.notify('closing', 'closing')
      this.resumed()
      this.closing = closeWorker(this.core).then(() => {
        this.core.notify('closed')
        this.cycles.stop()
      })
    }
    return this.closing
  }

  /**
   * Resolves once the worker's connection is ready (BullMQ's waitUntilReady): the client. Rejects with
   * ERR_CONNECTION naming where it goes (password masked) and the last connection error when it is not
   * ready within READY_TIMEOUT_MS (5 s); the worker itself goes on reconnecting.
   */
  async waitUntilReady(): Promise<RedisClient> {
    const { client } = this.core.conn
    try {
      await untilReady(client, READY_TIMEOUT_MS)
    } catch (err) {
      throw this.core.failure('connect to Redis for queue', err)
    }
    return client
  }

  /**
   * Stops this worker taking jobs (BullMQ's worker.pause(); queue.pause() stops every worker of the
   * queue): jobs it holds in hand go back; resolves once its running jobs ended, then emits `paused`, unless
   * `doNotWaitActive` (emitted at once). The run ends (run() resolves) once its jobs have.
   */
  async pause(doNotWaitActive = false): Promise<void> {
    const core = this.core
    if (core.phase !== 'running') return
    const ended = () => Promise.all([...core.runs.values()].map((r) => r.done))
    if (core.pausedLocally) {
      if (!doNotWaitActive) await ended()
      return
    }
    core.pausedLocally = true
    core.hand.giveBackAll()
    // Only this pause's: a resume and another pause meanwhile make their own.
    const pause = ++this.pauses
    const idle = ended().then(() => core.pausedLocally && pause === this.pauses && this.cycles.stop())
    if (!doNotWaitActive) await idle
    if (core.phase === 'running') core.notify('paused')
  }

  /** Takes jobs again after pause() (BullMQ's: a Worker made with autorun false and never run starts running). */
  resume(): void {
    const core = this.core
    if (core.phase !== 'running' || (!core.pausedLocally && this.cycles.running)) return
    const paused = core.pausedLocally
    this.resumed()
    // A worker with no processor has no run: resumed, its getNextJob takes jobs again.
    if (!this.cycles.running && !this.manual) void this.cycles.begin()
    if (paused) core.notify('resumed')
  }

  isPaused(): boolean {
    return this.core.pausedLocally
  }

  /** During a run (BullMQ's): from run() or autorun until paused with no job running, or closing. */
  isRunning(): boolean {
    return this.cycles.running && this.core.phase === 'running'
  }

  private resumed(): void {
    this.core.pausedLocally = false
    this.core.wake?.()
  }
}
