/**
 * Worker: takes jobs with a lease, runs the processor, and finishes each job fenced by the run's token.
 * This module is the job's path (take, run, finish); the helpers it delegates to live in worker/.
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
 * limited worker sleeps until the window has room, without asking Redis), stalledInterval (30000 ms) and
 * maxStalledCount (1) or skipStalledCheck (worker/stalled-checker.ts), removeOnComplete / removeOnFail (for
 * jobs with none of their own; age in s), settings.backoffStrategy (worker/failure.ts), clock (monotonic
 * timers; tests inject one). A processor that calls `await worker.rateLimit(ms)` then throws
 * Worker.RateLimitError() returns its job to the front of the line without using an attempt.
 *
 * Events: 'active' (job), 'progress' (job, progress), 'completed' (job, result), 'failed' (job, error;
 * job.state: 'delayed' or 'wait' when it will be retried, 'failed' when not; an UnrecoverableError fails
 * the job at once), 'lockLost' (job, EchoMQError ERR_LOCK_LOST; the processor's signal, when it takes one,
 * is aborted), 'error'.
 */

import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { EchoMQError, isDelayed, RateLimitError, redisError } from './errors.js'
import { Job, type JobScope, type JobState } from './job.js'
import { jobChanges } from './job-changes.js'
import type { Retention } from './job-options.js'
import { toJson } from './json.js'
import type { Untyped, WorkerListener } from './listeners.js'
import {
  type BackoffStrategy,
  DEFAULTS,
  MAX_STALLED_COUNT_DEFAULT,
  SWEEP_AUDIT_DEFAULT,
  SWEEP_GRACE_MS_DEFAULT,
  SWEEP_LIMIT_DEFAULT,
  validateQueueName,
  type WorkerSettings,
  workerSettings,
} from './options.js'
import { Queue } from './queue.js'
import { waitUntilFinished } from './queue-events.js'
import { namedDuplicate, workerConnectionName } from './redis/clients.js'
import {
  addLog,
  extend,
  type FinishAction,
  type FinishManyResult,
  type FinishRun,
  finish,
  finishRuns,
  type RunOutcome,
  rateLimit,
  type Taken,
  type TakeResult,
  take,
  unreserve,
  updateProgress,
} from './redis/commands.js'
import { type Connection, closeConnection, lastConnectionError, openConnection, type RedisClient, resilient } from './redis/connection.js'
import type { ConnectionOptions } from './redis/connection-options.js'
import { encodeKeep } from './redis/job-codec.js'
import { type QueueKeys, queueKeys } from './redis/keys.js'
import { ping, readBackoffType, readCandidates, readOutcome, rearmMarker, setMaxStalledCount, waitForWork } from './redis/queries.js'
import { registration } from './registry.js'
import { Trimmer } from './retention.js'
import { Batcher } from './worker/batcher.js'
import { closeWorker, type RunPhase } from './worker/closing.js'
import { customRetry, failureOf } from './worker/failure.js'
import { Hand } from './worker/hand.js'
import { InFlight } from './worker/in-flight.js'
import { LockManager } from './worker/lock-manager.js'
import { Promoter } from './worker/promoter.js'
import { StalledChecker } from './worker/stalled-checker.js'
import { type Lookahead, TakeAhead } from './worker/take-ahead.js'

/**
 * Internal events (symbols, so no BullMQ program meets them) for the worker-function handler (lib/lambda/):
 * IDLE when a take found nothing ready and the worker is about to block on the marker; a listener that
 * closes the worker then keeps it from blocking at all. HANDED_BACK (n) when n jobs set aside and not
 * started (reserved, in hand, or taken by a reply that came after close() began) went back, no attempt used.
 */
export const IDLE: unique symbol = Symbol('echomq.worker.idle')
export const HANDED_BACK: unique symbol = Symbol('echomq.worker.handedBack')

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
}

/**
 * How long an idle worker blocks on the marker (s). Every add wakes it; when the block times out nothing
 * was added, so it only renews its registration (REGISTRATION_REFRESH_MS, the same minute) and blocks
 * again: an idle worker sends two commands a minute.
 */
const BLOCK_TIMEOUT_S = 60
/** A blocking call with no answer this long past its timeout is on a dead link: reconnect. */
const BLOCK_GUARD_MS = 10_000
const MAX_TAKE_BATCH = 100
const RETRY_BACKOFF_MS = [100, 250, 500, 1000, 2000]
/**
 * Reconnects a worker's call waits through before it fails (about 30 s of Redis refusing connections):
 * more than a queue's, so a job that ends while Redis restarts is still finished, not run again after a
 * sweep. The outage itself is reported at once (an `error` event), not when the calls give up.
 */
const RECONNECTS_PER_CALL = 20
/** Most bytes of JSON a processor's result is stored with (as job data: DEFAULTS.maxDataBytes). */
const RESULT_MAX_BYTES = DEFAULTS.maxDataBytes

/**
 * A run: `running` (the processor has the job), `finishing` (its finish call is in flight: that call's
 * reply, not a heartbeat racing it, says whether it was accepted), `lost` (its lease was lost; the signal
 * is aborted and the worker told once), `abandoned` (close() gave up on it), `moved` (job.moveToDelayed
 * ended it: its job is in `delayed`, no finish follows); see worker/closing.ts.
 */
/** What a Worker emits besides `error` (BullMQ's names and arguments). */
type WorkerEvent =
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

/** How a run's finish call ended, and when. */
type FinishOutcome = RunOutcome & { finishedOn: number }

interface Run {
  job: Job
  token: string
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
type WorkerPhase = 'running' | 'draining' | 'abandoning' | 'closed'

/** A job taken (or read into the hand: `scored` and `reservedAt` then say what its reservation was). */
type Started = Taken & { sentAt: number; scored?: boolean; reservedAt?: number }

/** Most bytes of JSON one progress report is stored with. */
const PROGRESS_MAX_BYTES = 64 * 1024

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the interface above only types on/once/off (BullMQ's WorkerListener)
export class Worker<Data = Untyped, Result = Untyped, Name extends string = string> extends EventEmitter {
  /** BullMQ's way to make one: `throw Worker.RateLimitError()` (see RateLimitError). */
  static RateLimitError(): RateLimitError {
    return new RateLimitError()
  }

  readonly name: string
  /** Random (96 bits); each run's token is `<id>:<start number>`. */
  readonly id = randomBytes(12).toString('base64url')
  private readonly settings: WorkerSettings
  private readonly keys: QueueKeys
  private readonly conn: Connection
  private readonly blocking: RedisClient
  private readonly locks: LockManager
  private readonly runs = new Map<string, Run>()
  private readonly loopDone: Promise<void>
  private phase: WorkerPhase = 'running'
  private closing: Promise<void> | undefined
  private wake: (() => void) | undefined
  private stopped: () => void = () => undefined
  /** Settles on close(): a blocking call on a client that is reconnecting never settles once disconnect()ed. */
  private readonly stopSignal = new Promise<void>((resolve) => (this.stopped = resolve))
  /** Settles once the blocking client's socket closed (ioredis keeps a timer until then). */
  private blockingEnded: Promise<unknown> = Promise.resolve()
  private readonly takeAhead: TakeAhead
  private readonly wantsSignal: boolean
  /** Calls in flight: close() waits for them, since a finish may have taken a job. */
  private readonly calls = new InFlight()
  private readonly promoter: Promoter
  private readonly trimmer: Trimmer
  /** The worker's stalled sweep (none with skipStalledCheck). */
  private readonly stalledChecker: StalledChecker
  /** close(true): do not wait for running jobs. */
  private force = false
  /** Until when (this worker's clock) the limiter, or queue.rateLimit, holds new starts back. */
  private heldUntil = Number.NEGATIVE_INFINITY
  /** What the jobs a processor is given act through: progress and log lines fenced by the run's token. */
  private readonly scope: JobScope
  /** The finishes of one tick, sent together (see worker/batcher.ts). */
  private readonly finishes: Batcher<FinishRun, FinishOutcome>
  /** Processors running now, or about to run (at most concurrency). */
  private processing = 0
  /** Jobs the take or finish calls in flight are taking, each for a slot free now. */
  private incoming = 0
  /** Jobs read and reserved, not taken until they start (worker/hand.ts). */
  private readonly hand: Hand<Started>
  /** worker.pause(): no job is taken until resume(). */
  private pausedLocally = false
  /** A job started since the worker last found the queue empty (for the `drained` event). */
  private hadWork = false
  /** The connection answered once (for the `ready` event). */
  private ready = false
  /** The Queue a job's own remove(), retry(), promote() and getState() go through, made when first used. */
  private jobQueue: Queue | undefined

  constructor(
    name: string,
    private readonly processor: Processor<Data, Result, Name>,
    options?: WorkerOptions,
  ) {
    super()
    this.name = validateQueueName(name)
    if (typeof processor !== 'function') throw new EchoMQError('ERR_OPTIONS', 'expected processor to be a function')
    this.settings = workerSettings(options)
    const { clock, lockDuration } = this.settings
    this.keys = queueKeys(this.settings.prefix, this.name)
    this.conn = openConnection(this.settings.connection, { redisOptions: resilient(RECONNECTS_PER_CALL) })
    const client = this.conn.client
    // Named as BullMQ names it: queue.getWorkers() and the dashboard see the worker by this connection.
    this.blocking = namedDuplicate(client, workerConnectionName(this.settings.prefix, this.name, this.settings.name))
    this.blocking.on('error', () => undefined) // the main connection reports the outage
    this.watchConnection()
    this.wantsSignal = processor.length >= 3
    this.takeAhead = new TakeAhead({
      concurrency: this.settings.concurrency,
      taker: {
        workerToken: this.id,
        leaseMs: lockDuration,
        workerName: this.settings.name,
        ...(this.settings.limiter ? { limit: this.settings.limiter } : {}),
      },
      reserveMs: lockDuration,
      running: (id) => this.runs.has(id) || this.hand.has(id),
      read: (n) => readCandidates(client, this.keys, n),
      giveBack: (ids) => this.calls.track(unreserve(client, this.keys, ids).then((n) => this.handedBack(n))),
      held: () => this.hand.size,
      clock,
      onError: (err) => this.report(this.failure('return reserved jobs to wait in queue', err)),
    })
    this.promoter = new Promoter(client, this.keys, clock, (err) => this.report(this.failure('promote delayed jobs of queue', err)))
    this.trimmer = new Trimmer(
      client,
      this.keys,
      (call) => this.calls.track(call),
      // After close() the connection is gone on purpose; the next finish or sweep trims instead.
      (set, err) => this.phase === 'running' && this.report(this.failure(`trim ${set} jobs of queue`, err)),
    )
    this.locks = new LockManager({
      extend: (leases) => extend(client, this.keys, lockDuration, leases),
      intervalMs: this.settings.heartbeatInterval,
      leaseMs: lockDuration,
      clock,
      onLost: (id, reason) => {
        if (this.runs.get(id)?.phase === 'running') this.lockLost(id, reason)
      },
      onError: (err) => this.report(this.failure('renew leases of queue', err)),
    })
    this.scope = this.jobScope()
    this.hand = new Hand<Started>({
      clock,
      maxAgeMs: lockDuration / 2,
      idOf: (s) => s.job.id,
      giveBack: (held) => void this.unreserve(held.map((s) => s.job.id)),
    })
    this.finishes = new Batcher(Math.max(1, Math.ceil(this.settings.concurrency / 2)), (runs) => this.finishRuns(runs))
    this.stalledChecker = new StalledChecker({
      client,
      keys: this.keys,
      intervalMs: this.settings.stalledInterval,
      sweep: {
        prefix: this.settings.prefix,
        graceMs: Math.min(SWEEP_GRACE_MS_DEFAULT, this.settings.stalledInterval),
        limit: SWEEP_LIMIT_DEFAULT,
        audit: SWEEP_AUDIT_DEFAULT,
      },
      clock,
      onError: (err) => this.report(this.failure('check for stalled jobs of queue', err)),
      onStalled: (ids) => {
        for (const id of ids) this.notify('stalled', id, 'active')
      },
    })
    this.locks.start()
    this.loopDone = this.loop()
    this.startStalledCheck()
  }

  /** Records a non-default maxStalledCount for every sweep of the queue, then starts the worker's own sweep. */
  private startStalledCheck(): void {
    const { maxStalledCount, stalledInterval } = this.settings
    const recorded =
      maxStalledCount === MAX_STALLED_COUNT_DEFAULT && stalledInterval === 0
        ? Promise.resolve()
        : this.calls.track(setMaxStalledCount(this.conn.client, this.keys, maxStalledCount, MAX_STALLED_COUNT_DEFAULT))
    void recorded.then(
      () => this.phase === 'running' && this.stalledChecker.start(),
      (err) => this.report(this.failure('record maxStalledCount (in meta) of queue', err)),
    )
  }

  /**
   * BullMQ's worker.rateLimit(ms): holds every worker of the queue back from starting jobs for `ms`; pair it
   * with `throw Worker.RateLimitError()`, which returns the job to the line without using an attempt.
   */
  async rateLimit(ms: number): Promise<void> {
    if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0)
      throw new EchoMQError('ERR_OPTIONS', `expected rateLimit's ms to be an integer >= 0, got: ${String(ms)}`)
    try {
      await rateLimit(this.conn.client, this.keys, ms)
    } catch (err) {
      throw this.failure('rate-limit queue', err)
    }
    this.hold(ms)
  }

  /**
   * Stops taking jobs and waits for the running ones to end (BullMQ's close()), for at most closeTimeout
   * when given; close(true) does not wait. A processor still running then is aborted and, if it does not
   * return within a short margin, given up on: its job is not put back in line while it runs (its lease
   * lapses and the stalled sweep recovers it). Safe to call more than once.
   */
  close(force = false): Promise<void> {
    if (force) this.force = true
    if (!this.closing) {
      this.notify('closing', 'closing')
      this.resumed()
      this.closing = this.shutdown().then(() => this.notify('closed'))
    }
    return this.closing
  }

  /** Resolves once the worker's connection answers (BullMQ's waitUntilReady): the client. */
  async waitUntilReady(): Promise<RedisClient> {
    try {
      await ping(this.conn.client)
    } catch (err) {
      throw this.failure('connect to Redis for queue', err)
    }
    return this.conn.client
  }

  /**
   * Stops this worker taking jobs (BullMQ's worker.pause(); queue.pause() stops every worker of the
   * queue): jobs it holds in hand go back; resolves once its running jobs ended, unless `doNotWaitActive`.
   */
  async pause(doNotWaitActive = false): Promise<void> {
    if (this.phase !== 'running') return
    if (!this.pausedLocally) {
      this.pausedLocally = true
      this.hand.giveBackAll()
      this.notify('paused')
    }
    if (!doNotWaitActive) await Promise.all([...this.runs.values()].map((r) => r.done))
  }

  /** Takes jobs again after pause(). */
  resume(): void {
    if (!this.pausedLocally || this.phase !== 'running') return
    this.resumed()
    this.notify('resumed')
  }

  isPaused(): boolean {
    return this.pausedLocally
  }

  /** Taking and running jobs: not paused, not closing. */
  isRunning(): boolean {
    return this.phase === 'running' && !this.pausedLocally
  }

  private resumed(): void {
    this.pausedLocally = false
    this.wake?.()
  }

  private async loop(): Promise<void> {
    const { clock } = this.settings
    const register = registration(this.conn.client, this.settings.prefix, this.name, () => clock.now())
    const ensureRegistered = () =>
      void register().then(
        (err) => err && this.report(this.failure(`register (in ${this.settings.prefix}:queues, for the reaper) queue`, err)),
      )
    let failures = 0
    // After a block that timed out nothing was added: block again without reading `wait`.
    let idle = false
    while (this.phase === 'running') {
      ensureRegistered()
      try {
        // Paused (worker.pause()): no job is taken until resume() or close().
        if (this.pausedLocally) {
          await this.nap()
          continue
        }
        // A slot a run's finish is taking for is not free (runs holds the finishing ones), nor one a call in flight fills.
        this.startReady()
        const free = this.settings.concurrency - this.runs.size - this.incoming
        if (free <= 0) {
          await this.nap()
          continue
        }
        // Limited: sleep until the window has room (a run ending wakes it too), without asking Redis.
        const held = this.heldUntil - clock.now()
        if (held > 0) {
          await this.nap(held)
          continue
        }
        const took = !idle && (await this.take(Math.min(free, MAX_TAKE_BATCH)))
        // Held back by the limiter: the next round sleeps for it, rather than wait on the marker.
        if (!took && this.heldUntil > clock.now()) continue
        if (!took) {
          // Nothing was ready (nor paused work): as BullMQ's worker, the queue ran dry for this worker since it last had work.
          if (this.hadWork) {
            this.hadWork = false
            this.notify('drained')
          }
          this.emit(IDLE)
          if ((this.phase as WorkerPhase) !== 'running') break
          const woken = await this.block()
          idle = woken === 'timeout'
          // Woken for work while paused: the wake-up goes back for the other workers.
          if (woken === 'woken' && this.pausedLocally) await rearmMarker(this.conn.client, this.keys)
          // The marker named a due time: promote what is due, and keep a timer for the rest.
          if (woken === 'due') await this.promoter.promoteDue()
        }
        failures = 0
      } catch (err) {
        if (this.phase !== 'running') break
        idle = false
        this.report(this.failure('take jobs from queue', err))
        await this.nap(RETRY_BACKOFF_MS[Math.min(failures++, RETRY_BACKOFF_MS.length - 1)])
      }
    }
  }

  /** Waits on the marker until a job is added, close() is called, or BLOCK_TIMEOUT_S passes. */
  private async block(): Promise<'woken' | 'due' | 'timeout' | 'stopped'> {
    let guard: unknown
    const dead = new Promise<'dead'>((resolve) => {
      guard = this.settings.clock.setTimeout(() => resolve('dead'), BLOCK_TIMEOUT_S * 1000 + BLOCK_GUARD_MS)
    })
    try {
      const popped = waitForWork(this.blocking, this.keys, BLOCK_TIMEOUT_S)
      const outcome = await Promise.race([popped, this.stopSignal.then(() => 'stopped' as const), dead])
      if (outcome === 'stopped') return 'stopped'
      if (outcome === 'dead') {
        // A lost wake-up is repaired by the next sweep, which re-arms the marker while `wait` has jobs.
        this.blocking.disconnect(true)
        return 'woken'
      }
      if (outcome === null) return 'timeout'
      return outcome === 'd' ? 'due' : 'woken'
    } finally {
      this.settings.clock.clearTimeout(guard)
    }
  }

  /**
   * Takes up to n jobs (reserved or peeked ids, else ids read from `wait`) and starts them; false when
   * nothing was ready (the read found nothing, or the take found nothing and nothing to reserve). The
   * candidates stay claimed until the jobs taken are running.
   */
  private async take(n: number): Promise<boolean> {
    const look = await this.takeAhead.forTake(n)
    if (look.ids.length === 0) return false
    if (this.phase !== 'running') {
      this.takeAhead.settle(look, undefined)
      return false
    }
    const sentAt = this.settings.clock.now()
    // Candidates read from the line may go to another worker first: the same call reserves others in their place.
    const onMiss = { max: look.reserved ? 0 : look.ids.length, reserveMs: this.settings.lockDuration }
    let result: TakeResult
    this.incoming += look.ids.length
    try {
      result = await take(this.conn.client, this.keys, this.takeAhead.takeNext(look), look.ids, look.reserved, onMiss)
    } catch (err) {
      this.takeAhead.settle(look, undefined)
      throw err
    } finally {
      this.incoming -= look.ids.length
    }
    for (const t of result.taken) this.startOrGiveBack({ ...t, sentAt })
    this.takeAhead.settle(look, { left: result.left, taken: result.taken.length, reservedNext: result.reserved })
    this.promoter.learn(result)
    this.hold(result.waitMs)
    if (result.taken.length > 0 || result.reserved.length > 0) return true
    // Candidates gone and none reserved in their place (a limiter reserves none): read the line again,
    // which says whether anything is still ready. Paused, or all left (the limiter): wait as told.
    const gone = look.ids.length - result.left.length
    return gone > 0 && result.waitMs === 0 && this.phase === 'running'
  }

  /**
   * A job a take or finish took starts in the slot that call was sent for; one whose reply came after
   * close() began (a slow or stalled link), or that finds no slot, goes back to `wait` unstarted.
   */
  private startOrGiveBack(started: Started): void {
    if (this.runs.get(started.job.id)?.token === started.token) return // a replayed take handed back a run going here
    if (this.phase === 'running' && this.processing < this.settings.concurrency) this.start(started)
    else void this.calls.track(this.giveBack(started))
  }

  /** How many jobs a worker holds in hand beyond its concurrency: one while jobs are short, none with a limiter (it counts starts). */
  private inHand(): number {
    return this.takeAhead.hot && !this.settings.limiter ? 1 : 0
  }

  /** A slot is free, and no call in flight fills it: the jobs in hand start now. */
  private startReady(): void {
    while (this.phase === 'running' && !this.pausedLocally && this.processing + this.incoming < this.settings.concurrency) {
      const next = this.hand.start()
      if (!next) return
      this.start(next, true)
    }
  }

  /** Jobs a finish read into the hand (a reply after close() or pause() began hands them back). */
  private holdAll(handed: Started[]): void {
    if (handed.length === 0) return
    if (this.phase !== 'running' || this.pausedLocally) void this.unreserve(handed.map((s) => s.job.id))
    else for (const s of handed) this.hand.hold(s, s.reservedAt ?? s.sentAt)
  }

  /**
   * Starts a run. A job from the hand is not taken yet: the call that takes it (the batcher's, which
   * leaves in this tick) goes out before its processor runs, and its lease is renewed once taken.
   */
  private start({ job, token, sentAt }: Started, fromHand = false): void {
    const current = this.runs.get(job.id)
    if (current?.token === token) return // a replayed take handed back a run already going here
    // A sweep recovered the job from a run still going here and this worker took it again: that run is fenced out.
    if (current) this.lockLost(job.id, 'the job was recovered and taken again')
    const controller = this.wantsSignal ? new AbortController() : undefined
    if (!fromHand) this.locks.add({ id: job.id, token }, sentAt)
    this.processing++
    this.hadWork = true
    const run: Run = { job: new Job(job, this.scope, token), token, controller, phase: 'running', done: Promise.resolve() }
    this.runs.set(job.id, run)
    // A scheduler's run: its next run is made now, as BullMQ's worker makes it (worker/promoter.ts).
    this.promoter.started(job.id)
    let running: Promise<void>
    if (fromHand) {
      this.finishes.poke()
      running = new Promise<void>((resolve) => process.nextTick(resolve)).then(() => this.execute(run))
    } else running = this.execute(run)
    run.done = running.finally(() => {
      if (this.runs.get(job.id) !== run) return this.wake?.()
      this.locks.remove(job.id)
      this.runs.delete(job.id)
      this.wake?.()
    })
  }

  /** Runs the processor, then finishes the run: complete, fail (an attempt used) or release. */
  private async execute(run: Run): Promise<void> {
    this.notify('active', run.job)
    let action: FinishAction
    let value: string
    let result: unknown
    let error: unknown
    let failed = false
    let stack = ''
    let delayMs: number | undefined
    const started = this.settings.clock.now()
    try {
      result = await this.processor(run.job as Job<Data, Result, Name>, run.token, run.controller?.signal as AbortSignal)
      action = 'complete'
      value = this.resultJson(run.job.id, result)
    } catch (err) {
      failed = true
      error = err
      ;({ action, reason: value, stack } = failureOf(err))
      // A DelayedError after a moveToDelayed ended the run there (its phase is `moved`, see below).
      if (isDelayed(err) && run.phase !== 'moved')
        this.report(
          new EchoMQError(
            'ERR_JOB_STATE',
            `job ${run.job.id} of queue ${this.name}: DelayedError thrown without job.moveToDelayed; the job went back to wait`,
          ),
        )
      if (action === 'fail') {
        const retry = await this.customRetry(run, err)
        if (retry === 'final') action = 'fail-final'
        else delayMs = retry
      }
    }
    this.processing--
    this.startReady()
    this.takeAhead.ran(this.settings.clock.now() - started)
    // Given up on by close(), or ended by job.moveToDelayed (its job is in `delayed`: no finish).
    if (run.phase === 'abandoned' || run.phase === 'moved') return
    // A run aborted for a lost lease, or by close(), failed because of the abort: if the job is still its
    // own, return it to wait without charging an attempt (its processor has stopped).
    if ((run.phase === 'lost' || run.aborted) && action.startsWith('fail')) action = 'release'
    if (run.phase === 'running') run.phase = 'finishing'
    try {
      const keep = this.workerKeep(action)
      const reply = await this.finishes.add({
        run: { id: run.job.id, token: run.token },
        action,
        value,
        stack,
        ...(delayMs === undefined || action !== 'fail' ? {} : { delayMs }),
        ...(keep === undefined ? {} : { keep }),
      })
      if (reply.status === 'lost') {
        this.lockLost(run.job.id, `the job is now ${reply.state}; this run's result was discarded`, run)
        return
      }
      if (reply.trim) this.trimmer.request(reply.trim)
      run.job.state = reply.state as JobState
      if (action === 'release') return
      run.job.attemptsMade += 1
      if (reply.state === 'completed' || reply.state === 'failed') run.job.finishedOn = reply.finishedOn
      if (action === 'complete') {
        run.job.returnValue = result
        this.notify('completed', run.job, result)
      } else {
        if (reply.state === 'failed') run.job.failedReason = value
        // BullMQ's `failed` event: the value as the processor threw it.
        this.notify('failed', run.job, failed ? error : undefined)
      }
    } catch (err) {
      // close() may have given up on the run meanwhile (past its timeout): its error is expected then.
      if ((run.phase as RunPhase) !== 'abandoned') this.report(this.failure(`finish job ${run.job.id} of queue`, err))
    }
  }

  /** A failure's retry under settings.backoffStrategy (worker/failure.ts): read the job's backoff type only then. */
  private async customRetry(run: Run, err: unknown): Promise<number | 'final' | undefined> {
    const strategy = this.settings.backoffStrategy
    if (!strategy || run.job.attemptsMade + 1 >= run.job.attempts) return undefined
    try {
      const type = await readBackoffType(this.conn.client, this.keys, run.job.id)
      return await customRetry(strategy, type, run.job.attemptsMade + 1, err, run.job)
    } catch (e) {
      this.report(
        new EchoMQError('ERR_OPTIONS', `settings.backoffStrategy failed for job ${run.job.id}: ${String((e as Error)?.message ?? e)}`),
      )
      return undefined
    }
  }

  /** The worker's removeOnComplete/removeOnFail, for a job with no retention of its own (lua/finish-15.lua). */
  private workerKeep(action: FinishAction): string | undefined {
    const keep = action === 'complete' ? this.settings.removeOnComplete : this.settings.removeOnFail
    return keep === undefined || action === 'release' ? undefined : encodeKeep(keep)
  }

  /**
   * One finish call for the runs that ended in the same tick (worker/batcher.ts), or for none (a job
   * started from the hand with no run ending): it takes the jobs started from the hand since the last
   * call, fills the free slots (from the reserved or peeked ids), reads the next job into the hand, and
   * prepares the calls after it, unless the worker is closing, paused or held back by its limiter.
   */
  private async finishRuns(runs: FinishRun[]): Promise<FinishOutcome[]> {
    const starts = this.hand.starts()
    const take = this.phase === 'running' && this.heldUntil <= this.settings.clock.now() && !this.pausedLocally
    const free = Math.max(0, Math.min(runs.length, this.settings.concurrency - this.processing - this.incoming))
    const look: Lookahead = this.takeAhead.forFinish(take, runs.length, free, this.inHand())
    const sentAt = this.settings.clock.now()
    const next = {
      ...this.takeAhead.takeNext(look),
      starts: starts.map((s) => ({ id: s.job.id, token: s.token, scored: s.scored === true })),
    }
    let reply: FinishManyResult
    this.incoming += look.ids.length
    try {
      reply = await this.calls.track(finishRuns(this.conn.client, this.keys, runs, next))
    } catch (err) {
      this.takeAhead.settle(look, undefined)
      for (const s of starts) this.lockLost(s.job.id, 'the call that takes it from the hand failed')
      throw err
    } finally {
      this.incoming -= look.ids.length
    }
    this.promoter.learn(reply)
    this.hold(reply.waitMs)
    this.confirmed(starts, reply, sentAt)
    for (const t of reply.taken) this.startOrGiveBack({ ...t, sentAt })
    const handed = reply.handed.map((t) => t.job.id)
    const hold = this.takeAhead.settle(look, {
      left: reply.left,
      taken: reply.taken.length,
      reservedNext: reply.reserved,
      peeked: reply.peeked,
      handed,
    })
    this.holdAll(
      reply.handed.flatMap((t) => {
        const reservedAt = hold.get(t.job.id)
        return reservedAt === undefined ? [] : [{ ...t, sentAt, reservedAt }]
      }),
    )
    this.startReady()
    return reply.runs.map((r) => ({ ...r, finishedOn: reply.finishedOn }))
  }

  /** What a call said of the jobs started from the hand: taken (their leases renewed from now on), or lost. */
  private confirmed(starts: Started[], reply: FinishManyResult, sentAt: number): void {
    for (const [i, s] of starts.entries()) {
      const run = this.runs.get(s.job.id)
      if (run?.token !== s.token) continue
      if (reply.confirmed[i] !== 'taken') {
        this.lockLost(s.job.id, 'its reservation was gone when it started (it expired, or the job was removed)', run)
        continue
      }
      run.job.startedOn = reply.finishedOn
      if (run.phase === 'running' || run.phase === 'finishing') this.locks.add({ id: s.job.id, token: s.token }, sentAt)
    }
  }

  /** The scope of the jobs this worker runs: writes fenced by the run's token; a lost run learns it. */
  private jobScope(): JobScope {
    const client = this.conn.client
    const changes = jobChanges({
      client,
      keys: this.keys,
      queue: this.name,
      maxDataBytes: RESULT_MAX_BYTES,
      call: async (what, fn) => {
        try {
          return await fn()
        } catch (err) {
          throw this.failure(what, err)
        }
      },
      // The run is over once its job is in `delayed`: no finish, no heartbeat (see DelayedError).
      moved: (id, token) => {
        const run = this.runs.get(id)
        if (run?.token !== token || run.phase !== 'running') return
        run.phase = 'moved'
        this.locks.remove(id)
      },
    })
    const refused = (job: Job, status: 'missing' | 'lost', what: string) =>
      status === 'lost'
        ? new EchoMQError('ERR_LOCK_LOST', `job ${job.id} of queue ${this.name} lost its lease: ${what}`)
        : new EchoMQError('ERR_JOB_MISSING', `job ${job.id} of queue ${this.name} no longer exists: ${what}`)
    return {
      updateProgress: async (job, progress, token) => {
        const json = toJson(progress, 'the progress', PROGRESS_MAX_BYTES)
        let status: 'ok' | 'missing' | 'lost'
        try {
          status = await updateProgress(client, this.keys, job.id, token ?? '', json)
        } catch (err) {
          throw this.failure(`update the progress of job ${job.id} of queue`, err)
        }
        if (status !== 'ok') throw refused(job, status, 'its progress was not recorded')
        this.notify('progress', job, progress)
      },
      log: async (job, row, token) => {
        if (typeof row !== 'string') throw new EchoMQError('ERR_OPTIONS', `expected a log line to be a string, got: ${typeof row}`)
        let reply: { status: 'ok' | 'missing' | 'lost'; count: number }
        try {
          reply = await addLog(client, this.keys, job.id, token ?? '', row)
        } catch (err) {
          throw this.failure(`log a line of job ${job.id} of queue`, err)
        }
        if (reply.status !== 'ok') throw refused(job, reply.status, 'the line was not logged')
        return reply.count
      },
      waitUntilFinished: (job, events, ttl) =>
        waitUntilFinished(events, { id: job.id, name: job.name, queue: this.name }, ttl, () => readOutcome(client, this.keys, job.id)),
      queue: () => {
        this.jobQueue ??= new Queue(this.name, { connection: client, prefix: this.settings.prefix })
        return this.jobQueue
      },
      changes: () => changes,
    }
  }

  /** A reply said the limiter (or queue.rateLimit) holds starts back for `ms`. */
  private hold(ms: number): void {
    if (ms > 0) this.heldUntil = Math.max(this.heldUntil, this.settings.clock.now() + ms)
  }

  private lockLost(id: string, reason: string, run = this.runs.get(id)): void {
    if (!run || run.phase === 'lost' || run.phase === 'abandoned' || run.phase === 'moved') return
    run.phase = 'lost'
    if (this.runs.get(id) === run) this.locks.remove(id)
    const err = new EchoMQError('ERR_LOCK_LOST', `job ${id} of queue ${this.name} lost its lease: ${reason}`)
    run.controller?.abort(err)
    this.notify('lockLost', run.job, err)
  }

  private shutdown(): Promise<void> {
    const { clock, closeTimeout, lockDuration } = this.settings
    return closeWorker({
      queue: this.name,
      clock,
      waitMs: this.force ? 0 : (closeTimeout ?? Number.POSITIVE_INFINITY),
      lockDuration,
      loopDone: this.loopDone,
      calls: this.calls,
      stopTaking: () => {
        this.hand.giveBackAll()
        this.phase = 'draining'
        this.stopped()
        this.wake?.()
        // A connected socket ends with the server's close; ioredis's disconnectTimeout timer runs until then.
        if (this.blocking.status === 'ready') this.blockingEnded = new Promise((resolve) => this.blocking.once('end', resolve))
        this.blocking.disconnect()
        void this.takeAhead.close()
      },
      linkUp: () => this.conn.client.status === 'ready',
      runs: () => [...this.runs.values()],
      abortRunning: () => {
        for (const run of this.runs.values()) {
          if (run.phase !== 'running') continue
          run.aborted = true
          run.controller?.abort(new EchoMQError('ERR_CLOSED', `worker for queue ${this.name} is closing: job ${run.job.id} aborted`))
        }
      },
      abandonRunning: () => {
        // Not put back in line while the processor runs (another worker would run it too): the lease lapses.
        let n = 0
        for (const run of this.runs.values()) {
          if (run.phase !== 'running') continue
          run.phase = 'abandoned'
          this.locks.remove(run.job.id)
          n++
        }
        return n
      },
      stopHelpers: () => [
        this.locks.close(),
        this.stalledChecker.close(),
        this.promoter.close().catch(() => undefined),
        this.jobQueue?.close() ?? Promise.resolve(),
      ],
      closeConnection: () => {
        this.unwatch()
        return Promise.all([closeConnection(this.conn), this.blockingEnded]).then(() => undefined)
      },
      disconnect: () => this.conn.client.disconnect(),
      report: (err) => this.report(err),
      enter: (phase) => {
        this.phase = phase
      },
    })
  }

  /** Reserved ids (jobs in hand) the worker will not start: back to where they were, no attempt used. */
  private async unreserve(ids: string[]): Promise<void> {
    try {
      this.handedBack(await this.calls.track(unreserve(this.conn.client, this.keys, ids)))
    } catch (err) {
      this.report(this.failure('return reserved jobs to wait in queue', err))
    }
  }

  /** A job taken after close() began (by a late take, or a finish while releasing): back to wait, no attempt used. */
  private async giveBack({ job, token }: Taken): Promise<void> {
    try {
      await finish(this.conn.client, this.keys, { id: job.id, token }, 'release', '')
      this.handedBack(1)
    } catch (err) {
      this.report(this.failure(`return job ${job.id} to wait in queue`, err))
    }
  }

  private handedBack(n: number): number {
    if (n > 0) this.emit(HANDED_BACK, n)
    return n
  }

  /** Sleeps until a run ends, close() is called, or `ms` passes. */
  private nap(ms?: number): Promise<void> {
    return new Promise((resolve) => {
      let timer: unknown
      this.wake = () => {
        this.wake = undefined
        if (timer !== undefined) this.settings.clock.clearTimeout(timer)
        resolve()
      }
      if (ms !== undefined) timer = this.settings.clock.setTimeout(() => this.wake?.(), ms)
    })
  }

  /** Emits to the application's listeners; a listener that throws is reported, never left to break a run. */
  private notify(event: WorkerEvent, ...args: unknown[]): void {
    try {
      this.emit(event, ...args)
    } catch (err) {
      this.report(
        new EchoMQError('ERR_OPTIONS', `a '${event}' listener of worker ${this.name} threw: ${(err as Error)?.message ?? String(err)}`, {
          cause: err,
        }),
      )
    }
  }

  /**
   * The result as stored (`returnValue`). One JSON cannot hold (a BigInt, a cycle, a Map, more than
   * RESULT_MAX_BYTES) is reported and stored as null: the job still completes, as running a processor
   * that succeeded again would repeat its work.
   */
  private resultJson(id: string, result: unknown): string {
    if (result === undefined) return 'null'
    try {
      return toJson(result, 'its result', RESULT_MAX_BYTES)
    } catch (err) {
      this.report(
        new EchoMQError('ERR_JOB_DATA', `job ${id} of queue ${this.name} completed, but ${(err as Error).message}: stored as null`),
      )
      return 'null'
    }
  }

  /** A failed call as an EchoMQError, naming the connection's last error (the host, ECONNREFUSED...). */
  private failure(what: string, err: unknown): EchoMQError {
    return redisError(this.name, what, err, lastConnectionError(this.conn.client))
  }

  /** Reports an outage once, when it starts (calls wait through reconnects before they fail). */
  private watchConnection(): void {
    let reported = false
    const onError = (err: Error) => {
      if (reported || this.phase !== 'running') return
      reported = true
      this.report(redisError(this.name, 'connect to Redis (retrying) for queue', err))
    }
    const onReady = () => {
      reported = false
      if (!this.ready) {
        this.ready = true
        this.notify('ready')
      }
    }
    this.conn.client.on('error', onError)
    this.conn.client.on('ready', onReady)
    // A connection given to the worker outlives it (a worker function's, reused by each invocation's worker).
    this.unwatch = () => {
      this.conn.client.off('error', onError)
      this.conn.client.off('ready', onReady)
    }
  }

  private unwatch: () => void = () => undefined

  private report(err: unknown): void {
    if (this.phase === 'closed') return
    if (this.listenerCount('error') > 0) this.emit('error', err)
    else console.error(`[echomq] worker ${this.name}:`, err instanceof Error ? err.message : err)
  }
}
