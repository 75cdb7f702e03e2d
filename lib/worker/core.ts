/**
 * WorkerCore: the one RunContext (worker/context.ts) the worker's parts share. It holds the worker's state
 * and makes its helpers (leases, take-ahead, promoter, trimmer, stalled check, finish batcher); each part
 * of the job's path (worker/taking.ts, running.ts, finishing.ts, closing.ts...) is a set of functions of
 * a RunContext, rather than hooks the Worker hands out. The public Worker (lib/worker.ts) makes one core
 * and delegates to those functions.
 */
import type { EventEmitter } from 'node:events'
import { EchoMQError, thrownText } from '../errors.js'
import type { JobScope } from '../job.js'
import {
  MAX_STALLED_COUNT_DEFAULT,
  SWEEP_AUDIT_DEFAULT,
  SWEEP_GRACE_MS_DEFAULT,
  SWEEP_LIMIT_DEFAULT,
  type WorkerSettings,
} from '../options.js'
import type { Queue } from '../queue.js'
import { namedDuplicate, workerConnectionName } from '../redis/clients.js'
import { extend, type FinishRun, MAXED, unreserve } from '../redis/commands.js'
import { type Connection, openConnection, type RedisClient, resilient } from '../redis/connection.js'
import { connectionFailure } from '../redis/connection-failure.js'
import { type QueueKeys, queueKeys } from '../redis/keys.js'
import { readCandidates, setMaxStalledCount } from '../redis/queries.js'
import { Trimmer } from '../retention.js'
import { Batcher } from './batcher.js'
import {
  type FinishOutcome,
  HANDED_BACK,
  type Processor,
  type Run,
  type RunContext,
  type Started,
  type WorkerEvent,
  type WorkerPhase,
} from './context.js'
import { stalledFailed } from './events.js'
import { finishRuns } from './finish-batch.js'
import { unreserveHeld } from './finishing.js'
import { Hand } from './hand.js'
import { InFlight } from './in-flight.js'
import { workerJobScope } from './job-scope.js'
import { LockManager } from './lock-manager.js'
import { Promoter } from './promoter.js'
import { StalledChecker } from './stalled-checker.js'
import { TakeAhead } from './take-ahead.js'

/**
 * Reconnects a worker's call waits through before it fails (about 30 s of Redis refusing connections):
 * more than a queue's, so a job that ends while Redis restarts is still finished, not run again after a
 * sweep. The outage itself is reported at once (an `error` event), not when the calls give up.
 */
const RECONNECTS_PER_CALL = 20

/** Finish calls a worker has out at once (worker/batcher.ts): one running in Redis, one on its way. */
const FINISHES_IN_FLIGHT = 2
/**
 * Most runs one finish call ends, whatever the concurrency: each run brings its keys and arguments, and
 * finish-16.lua unpacks their ids into single commands, so a call stays well under Redis's argument and Lua
 * stack limits (about 8,000 values) and a few milliseconds.
 */
const MAX_RUNS_PER_FINISH = 250

export class WorkerCore implements RunContext {
  readonly keys: QueueKeys
  readonly conn: Connection
  /** The connection the idle worker blocks on (the marker). */
  readonly blocking: RedisClient
  readonly runs = new Map<string, Run>()
  phase: WorkerPhase = 'running'
  wake: (() => void) | undefined
  stopped: () => void = () => undefined
  /** Settles on close(): a blocking call on a client that is reconnecting never settles once disconnect()ed. */
  readonly stopSignal = new Promise<void>((resolve) => (this.stopped = resolve))
  /** Settles once the blocking client's socket closed (ioredis keeps a timer until then). */
  blockingEnded: Promise<unknown> = Promise.resolve()
  readonly wantsSignal: boolean
  /** Calls in flight: close() waits for them, since a finish may have taken a job. */
  readonly calls = new InFlight()
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
  force = false
  /** Until when (this worker's clock) the limiter, or queue.rateLimit, holds new starts back. */
  heldUntil = Number.NEGATIVE_INFINITY
  maxed = false
  /** Processors running now, or about to run (at most concurrency). */
  processing = 0
  /** Jobs the take or finish calls in flight are taking, each for a slot free now. */
  incoming = 0
  startsLeft: number
  /** worker.pause(): no job is taken until resume(). */
  pausedLocally = false
  /** A job started since the worker last found the queue empty (for the `drained` event). */
  hadWork = false
  /** The Queue a job's own remove(), retry(), promote() and getState() go through, made when first used. */
  jobQueue: Queue | undefined
  /** The take loop (worker/taking.ts), which close() waits for: it may be waiting on a take over a stalled link. */
  loopDone: Promise<void> = Promise.resolve()
  /** Stops listening to the connection (worker/events.ts). */
  unwatch: () => void = () => undefined

  constructor(
    /** The Worker: where events go. */
    readonly emitter: EventEmitter,
    readonly name: string,
    /** Random (96 bits); each run's token is `<id>:<start number>`. */
    readonly id: string,
    readonly processor: Processor,
    readonly settings: WorkerSettings,
    internal: { maxStarts?: number | undefined; finishTogether?: boolean } = {},
  ) {
    const { clock, lockDuration } = settings
    this.startsLeft = internal.maxStarts ?? Number.POSITIVE_INFINITY
    this.keys = queueKeys(settings.prefix, name)
    this.conn = openConnection(settings.connection, { redisOptions: resilient(RECONNECTS_PER_CALL) })
    const client = this.conn.client
    // Named as BullMQ names it: queue.getWorkers() and the dashboard see the worker by this connection.
    this.blocking = namedDuplicate(client, workerConnectionName(settings.prefix, name, settings.name))
    this.blocking.on('error', () => undefined) // the main connection reports the outage
    this.wantsSignal = processor.length >= 3
    this.takeAhead = new TakeAhead({
      // Read at each use: worker.concurrency may change it.
      get concurrency() {
        return settings.concurrency
      },
      taker: {
        workerToken: id,
        leaseMs: lockDuration,
        workerName: settings.name,
        ...(settings.limiter ? { limit: settings.limiter } : {}),
      },
      reserveMs: lockDuration,
      running: (jobId) => this.runs.has(jobId) || this.hand.has(jobId),
      read: (n, more) => readCandidates(client, this.keys, n, more),
      giveBack: (ids) => this.calls.track(unreserve(client, this.keys, ids).then((n) => this.handedBack(n))),
      held: () => this.hand.size,
      // Jobs that may still be taken or set aside: those the worker may start, less those calls in flight take.
      budget: () => this.startsLeft - this.incoming,
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
      intervalMs: settings.heartbeatInterval,
      leaseMs: lockDuration,
      clock,
      onLost: (jobId, reason) => {
        if (this.runs.get(jobId)?.phase === 'running') this.lockLost(jobId, reason)
      },
      onError: (err) => this.report(this.failure('renew leases of queue', err)),
    })
    this.scope = workerJobScope(this)
    this.hand = new Hand<Started>({
      clock,
      maxAgeMs: lockDuration / 2,
      idOf: (s) => s.job.id,
      giveBack: (held) =>
        void unreserveHeld(
          this,
          held.map((s) => s.job.id),
        ),
    })
    this.finishes = internal.finishTogether
      ? new Batcher(Math.min(settings.concurrency, MAX_RUNS_PER_FINISH), (runs) => finishRuns(this, runs), 1)
      : new Batcher(
          Math.min(Math.ceil(settings.concurrency / 2), MAX_RUNS_PER_FINISH),
          (runs) => finishRuns(this, runs),
          FINISHES_IN_FLIGHT,
        )
    this.stalledChecker = this.stalledCheck()
  }

  /** The worker's stalled sweep, one pass an interval, claimed by one worker of the queue (worker/stalled-checker.ts). */
  private stalledCheck(): StalledChecker {
    const { settings } = this
    return new StalledChecker({
      client: this.conn.client,
      keys: this.keys,
      intervalMs: settings.stalledInterval,
      sweep: {
        prefix: settings.prefix,
        graceMs: Math.min(SWEEP_GRACE_MS_DEFAULT, settings.stalledInterval),
        limit: SWEEP_LIMIT_DEFAULT,
        audit: SWEEP_AUDIT_DEFAULT,
      },
      clock: settings.clock,
      onError: (err) => this.report(this.failure('check for stalled jobs of queue', err)),
      onStalled: ({ recovered, failed, failedJobs }) => {
        for (const jobId of [...recovered, ...failed]) this.notify('stalled', jobId, 'active')
        if (failed.length > 0) void this.calls.track(stalledFailed(this, failed, failedJobs))
      },
    })
  }

  /** Records a non-default maxStalledCount for every sweep of the queue, then starts the worker's own sweep. */
  startStalledCheck(): void {
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

  /** A reply said the limiter (or queue.rateLimit) holds starts back for `ms`, or the queue is paused (-1) or maxed (MAXED). */
  hold(ms: number): void {
    // Paused (-1), maxed or held back: ids peeked at are stale by the time it is not (TakeAhead.forgetPeeked).
    if (ms !== 0) this.takeAhead.forgetPeeked()
    if (ms > 0) this.heldUntil = Math.max(this.heldUntil, this.settings.clock.now() + ms)
    this.maxed = ms === MAXED
  }

  /** The run's lease is gone: its signal is aborted, the worker told once ('lockLost'). */
  lockLost(jobId: string, reason: string, run = this.runs.get(jobId)): void {
    if (!run || run.phase === 'lost' || run.phase === 'abandoned' || run.phase === 'moved') return
    run.phase = 'lost'
    if (this.runs.get(jobId) === run) this.locks.remove(jobId)
    const err = new EchoMQError('ERR_LOCK_LOST', `job ${jobId} of queue ${this.name} lost its lease: ${reason}`)
    run.controller?.abort(err)
    this.notify('lockLost', run.job, err)
  }

  handedBack(n: number): number {
    if (n > 0) this.emitter.emit(HANDED_BACK, n)
    return n
  }

  /** Sleeps until a run ends, close() is called, or `ms` passes. */
  nap(ms?: number): Promise<boolean> {
    return new Promise((resolve) => {
      let timer: unknown
      const end = (timedOut: boolean) => {
        this.wake = undefined
        if (timer !== undefined) this.settings.clock.clearTimeout(timer)
        resolve(timedOut)
      }
      this.wake = () => end(false)
      if (ms !== undefined) timer = this.settings.clock.setTimeout(() => end(true), ms)
    })
  }

  /**
   * Emits to the application's listeners; a listener that throws is reported, never left to break a run: an
   * Error reaches the `error` listeners as it was thrown (BullMQ's), and is printed naming its listener
   * when there are none.
   */
  notify(event: WorkerEvent, ...args: unknown[]): void {
    try {
      this.emitter.emit(event, ...args)
    } catch (err) {
      if (err instanceof Error && this.emitter.listenerCount('error') > 0) this.report(err)
      else
        this.report(
          new EchoMQError('ERR_OPTIONS', `a '${event}' listener of worker ${this.name} threw: ${thrownText(err)}`, { cause: err }),
        )
    }
  }

  /** A failed call as an EchoMQError, naming the connection's last error (ECONNREFUSED...) and where it goes. */
  failure(what: string, err: unknown): EchoMQError {
    return connectionFailure(this.conn, this.name, what, err)
  }

  report(err: unknown): void {
    if (this.phase === 'closed') return
    if (this.emitter.listenerCount('error') > 0) this.emitter.emit('error', err)
    else console.error(`[echomq] worker ${this.name}:`, err instanceof Error ? err.message : err)
  }
}
