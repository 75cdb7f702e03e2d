/**
 * Queue: the producer's side, and the operator's. `add` (and `addBulk`) stores jobs and pushes them on
 * `wait` (or on `delayed`, with a `delay`) in one script; an existing `jobId` returns the job already
 * stored and changes nothing. The getters (`getJob`, `getJobs`, `getJobCounts`, `getJobLogs`) read, and
 * `retryJobs`, `remove`, `pause`/`resume`, `drain`, `clean` and `obliterate` act, with BullMQ's names and
 * signatures. Inputs are validated before any Redis call, so a rejected call changes nothing. A Queue
 * emits BullMQ's QueueListener events for what its own calls did (waiting, paused, resumed, removed,
 * cleaned, progress; error while someone listens).
 *
 * Options: connection (ioredis client or URL; default redis://127.0.0.1:6379, as BullMQ's),
 * prefix ('emq'), maxDataBytes (1 MiB: the largest JSON text accepted as job data), defaultJobOptions
 * (see job-options.ts), streams.events.maxLen (the events stream's cap, 10,000).
 *
 * The class is the public surface; each method is a one-line delegation to the module of its group:
 * queue/adding.ts (add, addBulk), queue/getters.ts (get*, counts), queue/job-actions.ts (progress, logs,
 * retryJobs, promoteJob(s), remove), queue/control.ts (pause, resume, rateLimit, drain, clean, obliterate),
 * queue/job-schedulers.ts, queue/deduplication.ts, queue/workers.ts; events below; all act through one
 * QueueCore (queue/core.ts).
 */
import { EventEmitter } from 'node:events'
import type { BullJobState, Job, QueueCounts } from './job.js'
import type { JobOptions } from './job-options.js'
import type { JobProgress, ListenerArgs, QueueListener, Untyped } from './listeners.js'
import { queueSettings, validateQueueName } from './options.js'
import { add, addBulk, type BulkJob } from './queue/adding.js'
import * as control from './queue/control.js'
import { QueueCore } from './queue/core.js'
import * as dedup from './queue/deduplication.js'
import type { JobType } from './queue/getters.js'
import * as get from './queue/getters.js'
import * as limits from './queue/global-limits.js'
import * as act from './queue/job-actions.js'
import * as schedulers from './queue/job-schedulers.js'
import type { Metrics } from './queue/metrics.js'
import { queueWorkers } from './queue/workers.js'
import { closeConnection, type RedisClient } from './redis/connection.js'
import { connectionFailure } from './redis/connection-failure.js'
import type { ConnectionOptions } from './redis/connection-options.js'
import { type QueueKeys, qualifiedNameOf } from './redis/keys.js'
import { watchOutages } from './redis/outages.js'
import { ping } from './redis/queries.js'
import type { JobScheduler, JobTemplate, RepeatOptions } from './schedulers/schedulers.js'

export type { JobOptions } from './job-options.js'
export type { BulkJob } from './queue/adding.js'
export { type JobType, MAX_JOBS_PER_CALL, queueCounts } from './queue/getters.js'
export type { Metrics } from './queue/metrics.js'
export type { JobScheduler, JobTemplate, RepeatOptions } from './schedulers/schedulers.js'
export type { QueueCounts }

/** BullMQ's Queue<Job<D, R, N>> form: the data, result and name types a Job type carries. */
type DataOf<T> = T extends Job<infer D, Untyped, Untyped> ? D : T
type ResultOf<T, R> = T extends Job<Untyped, infer X, Untyped> ? X : R
type NameOf<T, N extends string> = T extends Job<Untyped, Untyped, infer X> ? X : N

export interface QueueOptions {
  connection?: ConnectionOptions | undefined
  prefix?: string
  maxDataBytes?: number
  defaultJobOptions?: Omit<JobOptions, 'jobId' | 'deduplication'>
  /** The events stream's cap (QueueEvents): `{ events: { maxLen } }`, 10,000 by default. */
  streams?: { events?: { maxLen?: number } }
}

/**
 * BullMQ's type parameters: `Queue<Data, Result, Name>` (or `Queue<Job<Data, Result, Name>>`); without
 * them `any`, `any`, `string`, as in BullMQ.
 */
export class Queue<
  DataTypeOrJob = Untyped,
  DefaultResultType = Untyped,
  DefaultNameType extends string = string,
  Data = DataOf<DataTypeOrJob>,
  Result = ResultOf<DataTypeOrJob, DefaultResultType>,
  Name extends string = NameOf<DataTypeOrJob, DefaultNameType>,
> extends EventEmitter {
  readonly name: string
  readonly keys: QueueKeys
  /** Every part of the queue acts through it (queue/core.ts). */
  private readonly core: QueueCore

  /** Stops passing the connection's outages on (set from the first `error` listener on: a client may serve many queues). */
  private unwatchErrors: (() => void) | undefined

  constructor(name: string, options?: QueueOptions) {
    super()
    this.name = validateQueueName(name)
    const { connection, ...settings } = queueSettings(options)
    this.core = new QueueCore(this, this.name, connection, settings)
    this.keys = this.core.keys
    cores.set(this, this.core)
  }

  /** BullMQ's qualifiedName: `<prefix>:{name}`, what a child's `opts.parent.queue` names. */
  get qualifiedName(): string {
    return qualifiedNameOf(this.keys)
  }

  get client(): RedisClient {
    return this.core.client
  }

  // Adding (queue/adding.ts)

  /** Adds a job; an existing `jobId` resolves to the job already stored, unchanged. */
  add(name: Name, data: Data, options?: JobOptions): Promise<J<Data, Result, Name>> {
    return add(this.core, name, data, options) as Promise<J<Data, Result, Name>>
  }

  /**
   * Adds jobs all or none: each is validated first (a bad one rejects the call and nothing is written),
   * then they go in calls of at most 200 jobs and 1 MiB of data, sent in one MULTI. Resolves to the jobs
   * in the order given (an existing `jobId`: the job already stored).
   */
  addBulk(jobs: BulkJob<Data, Name>[]): Promise<J<Data, Result, Name>[]> {
    return addBulk(this.core, jobs) as Promise<J<Data, Result, Name>[]>
  }

  // Getters and counts (queue/getters.ts)

  /** The job, or undefined when there is none (as BullMQ). */
  getJob(id: string): Promise<J<Data, Result, Name> | undefined> {
    return get.getJob(this.core, id) as Promise<J<Data, Result, Name> | undefined>
  }

  /**
   * Jobs by state, two ways:
   * - BullMQ's: `getJobs(types?, start = 0, end = -1, asc = false)`: a type or a list ('wait' or
   *   'waiting', 'paused', 'active', 'delayed', 'completed', 'failed'; none: all), concatenated in type
   *   order, each newest first (or oldest first with `asc`), ranks negative from the end as in Redis;
   * - EchoMQ's: `getJobs(state, { start, end })`: a page of one state, `wait` in the order the jobs will
   *   run (those a busy worker reserved first), `delayed` by due time, `active` by lease deadline,
   *   `completed` and `failed` most recent first; at most MAX_JOBS_PER_CALL.
   * Jobs removed while being read are left out.
   */
  getJobs(types?: JobType | JobType[], start?: number | { start?: number; end?: number }, end?: number, asc?: boolean) {
    return get.getJobs(this.core, types, start, end, asc) as Promise<J<Data, Result, Name>[]>
  }

  /** The ids getJobs would read (BullMQ's getRanges): the same types, ranks and order, without the jobs. */
  getRanges(types?: JobType | JobType[], start = 0, end = -1, asc = false): Promise<string[]> {
    return get.getRanges(this.core, types, start, end, asc)
  }

  /** Counts per type, keyed as asked (BullMQ's getJobCounts; none: BullMQ 6's default types). */
  getJobCounts(...types: JobType[]): Promise<Record<string, number>> {
    return get.getJobCounts(this.core, types)
  }

  /** The sum of getJobCounts over `types` (none: BullMQ 6's default types). */
  getJobCountByTypes(...types: JobType[]): Promise<number> {
    return get.getJobCountByTypes(this.core, types)
  }

  getWaitingCount = (): Promise<number> => this.getJobCountByTypes('waiting')
  getPrioritizedCount = (): Promise<number> => this.getJobCountByTypes('prioritized')
  getActiveCount = (): Promise<number> => this.getJobCountByTypes('active')
  getDelayedCount = (): Promise<number> => this.getJobCountByTypes('delayed')
  getCompletedCount = (): Promise<number> => this.getJobCountByTypes('completed')
  getFailedCount = (): Promise<number> => this.getJobCountByTypes('failed')
  getWaitingChildrenCount = (): Promise<number> => this.getJobCountByTypes('waiting-children')
  /** Jobs not yet running or finished, as BullMQ 6.7 counts them: waiting, delayed, prioritized, waiting-children. */
  count = (): Promise<number> => this.getJobCountByTypes('waiting', 'delayed', 'prioritized', 'waiting-children')
  getWaiting = (start = 0, end = -1) => this.getJobs(['waiting'], start, end, true)
  getActive = (start = 0, end = -1) => this.getJobs('active', start, end, true)
  getDelayed = (start = 0, end = -1) => this.getJobs('delayed', start, end, true)
  getCompleted = (start = 0, end = -1) => this.getJobs('completed', start, end, false)
  getFailed = (start = 0, end = -1) => this.getJobs('failed', start, end, false)
  getPrioritized = (start = 0, end = -1) => this.getJobs('prioritized', start, end, true)
  /** Flows' parents waiting for their children (lib/flows/), oldest first. */
  getWaitingChildren = (start = 0, end = -1) => this.getJobs('waiting-children', start, end, true)
  /** Waiting jobs per priority asked for (BullMQ's; 0: those without one), keyed by priority. */
  getCountsPerPriority = (priorities: number[]) => get.getCountsPerPriority(this.core, priorities)

  /**
   * Finished jobs per minute, BullMQ's shape ({ meta: { count, prevTS, prevCount }, data, count }), over
   * the last hour EchoMQ keeps for every queue (see queue/metrics.ts for how it differs from BullMQ's).
   */
  getMetrics(type: 'completed' | 'failed', start = 0, end = -1): Promise<Metrics> {
    return get.getMetrics(this.core, type, start, end)
  }

  /** A job's log lines, `start`..`end` (inclusive; negative from the end), oldest first unless `asc` is false. */
  getJobLogs(id: string, start = 0, end = -1, asc = true): Promise<{ logs: string[]; count: number }> {
    return get.getJobLogs(this.core, id, start, end, asc)
  }

  /** A job's state now, under BullMQ's names: `waiting` for `wait`, `unknown` when there is no such job. */
  getJobState(id: string): Promise<BullJobState> {
    return get.getJobState(this.core, id)
  }

  counts(): Promise<QueueCounts> {
    return get.counts(this.core)
  }

  // A job by id (queue/job-actions.ts)

  /** Records a job's progress (a `progress` event here and in QueueEvents), as BullMQ's updateJobProgress. */
  updateJobProgress(jobId: string, progress: JobProgress): Promise<void> {
    return act.updateJobProgress(this.core, jobId, progress)
  }

  /** Appends a line to a job's log (BullMQ's addJobLog); the job's own keepLogs bounds it. */
  addJobLog(jobId: string, logRow: string): Promise<number> {
    return act.addJobLog(this.core, jobId, logRow)
  }

  /** Failed (or `state: 'completed'`) jobs back to `wait`, attemptsMade kept (BullMQ's): `ids` (all in that state), or the oldest `limit` (all). */
  retryJobs(options?: act.RetryJobsOptions): Promise<string[]> {
    return act.retryJobs(this.core, options)
  }

  /** A delayed job to the back of `wait` now, due or not (BullMQ's job.promote()); promoteJobs: all of them. */
  promoteJob(id: string): Promise<void> {
    return act.promoteJob(this.core, id)
  }
  promoteJobs = (opts?: { count?: number }): Promise<void> => act.promoteJobs(this.core, opts)

  /** BullMQ's remove: 1, or 0 when the job (or a pending job of its tree) is in flight: nothing removed (removeJob says more). */
  remove(id: string, opts?: { removeChildren?: boolean }): Promise<0 | 1> {
    return act.remove(this.core, id, opts)
  }

  /** EchoMQ's remove: whether there was such a job; ERR_JOB_ACTIVE (nothing removed) for one in flight, or a tree with one. */
  removeJob(id: string): Promise<boolean> {
    return act.removeJob(this.core, id)
  }

  // The whole queue: pause, rate limit, clean-up (queue/control.ts)

  /** Every worker of the queue, on every host, stops taking jobs (running ones finish); adds and recoveries go on. */
  pause(): Promise<void> {
    return control.pause(this.core)
  }

  /** Workers take jobs again. */
  resume(): Promise<void> {
    return control.resume(this.core)
  }

  isPaused(): Promise<boolean> {
    return control.isPaused(this.core)
  }

  /** Holds every worker of the queue back from starting jobs for `ms` (BullMQ's rateLimit; Worker.RateLimitError). */
  rateLimit(ms: number): Promise<void> {
    return control.rateLimit(this.core, ms)
  }

  /** Lifts a rateLimit hold and empties the limiters' window (BullMQ's): 1 when there was one, else 0. */
  removeRateLimitKey = (): Promise<number> => control.removeRateLimitKey(this.core)

  /**
   * BullMQ's getRateLimitTtl(maxJobs?): ms left before the queue may start jobs again (a rateLimit hold, or
   * the worker limiters' window, counted with maxJobs only when it holds that many starts); -2 (0 with
   * maxJobs) when nothing limits it. redis/queries.ts rateLimitTtl says how.
   */
  async getRateLimitTtl(maxJobs?: number): Promise<number> {
    return control.getRateLimitTtl(this.core, maxJobs)
  }

  // The queue's own limits, across every worker (queue/global-limits.ts): BullMQ's, stored in meta as BullMQ's

  /** At most `concurrency` jobs active at once, whatever each worker's concurrency (taken at each worker's next take). */
  setGlobalConcurrency = (concurrency: number): Promise<number> => limits.setGlobalConcurrency(this.core, concurrency)
  getGlobalConcurrency = (): Promise<number | null> => limits.getGlobalConcurrency(this.core)
  removeGlobalConcurrency = (): Promise<number> => limits.removeGlobalConcurrency(this.core)
  /** Whether as many jobs are active as the global concurrency allows. */
  isMaxed = (): Promise<boolean> => limits.isMaxed(this.core)
  /** At most `max` jobs started in any `duration` ms, across every worker, in place of the workers' own limiters. */
  setGlobalRateLimit = (max: number, duration: number): Promise<number> => limits.setGlobalRateLimit(this.core, max, duration)
  getGlobalRateLimit = (): Promise<{ max: number; duration: number } | null> => limits.getGlobalRateLimit(this.core)
  removeGlobalRateLimit = (): Promise<number> => limits.removeGlobalRateLimit(this.core)

  /** Removes every waiting job, and with `delayed` every delayed one, with their logs (BullMQ's drain). */
  drain(delayed = false): Promise<void> {
    return control.drain(this.core, delayed)
  }

  /**
   * BullMQ's clean: removes up to `limit` jobs (0: no limit) of `type` at least `grace` ms old (a waiting one by BullMQ's
   * timestamps) as remove() does, oldest first; resolves to their ids. 'paused' removes none (its jobs are 'wait'); 'active': ERR_OPTIONS.
   */
  clean(grace: number, limit = 0, type: control.CleanType = 'completed'): Promise<string[]> {
    return control.clean(this.core, grace, limit, type)
  }

  /**
   * Deletes the queue: every job, its log and lease, the queue's keys and its registry entry, in bounded
   * steps; it is paused first, so no worker takes a job meanwhile. Refused with ERR_QUEUE_ACTIVE (nothing
   * deleted, the queue left paused) while jobs are in flight, unless `force`.
   */
  obliterate(options?: { force?: boolean }): Promise<void> {
    return control.obliterate(this.core, options)
  }

  // Job schedulers (queue/job-schedulers.ts)

  /** Creates or changes job scheduler `id` (BullMQ's upsertJobScheduler): its first run's job, if any. */
  upsertJobScheduler(id: string, repeat: RepeatOptions, template?: JobTemplate<Data, Name>): Promise<J<Data, Result, Name> | undefined> {
    return schedulers.upsertJobScheduler(this.core, id, repeat, template) as Promise<J<Data, Result, Name> | undefined>
  }

  /** Job scheduler `id` ({ key, name, next, pattern | every, tz, limit, template, ... }), undefined when there is none. */
  getJobScheduler(id: string): Promise<JobScheduler | undefined> {
    return schedulers.getJobScheduler(this.core, id)
  }

  /** Job schedulers by when their next period is due (`asc`: soonest first); ranks as in Redis. */
  getJobSchedulers(start = 0, end = -1, asc = false): Promise<JobScheduler[]> {
    return schedulers.getJobSchedulers(this.core, start, end, asc)
  }

  /** How many job schedulers the queue has (BullMQ's getJobSchedulersCount). */
  getJobSchedulersCount(): Promise<number> {
    return schedulers.getJobSchedulersCount(this.core)
  }

  /** Removes job scheduler `id` and its newest run if no worker started it (a `removed` event); resolves to whether there was one. */
  removeJobScheduler(id: string): Promise<boolean> {
    return schedulers.removeJobScheduler(this.core, id)
  }

  // Deduplication (queue/deduplication.ts)

  /** The id of the job holding deduplication id `id` now, or null (BullMQ's getDeduplicationJobId; see queue/deduplication.ts). */
  getDeduplicationJobId = (id: string): Promise<string | null> => dedup.getDeduplicationJobId(this.core, id)
  /** Releases deduplication id `id` whoever holds it (BullMQ's removeDeduplicationKey): 1 when it was held, else 0. */
  removeDeduplicationKey = (id: string): Promise<number> => dedup.removeDeduplicationKey(this.core, id)

  /** @deprecated BullMQ's old name for getDeduplicationJobId. */
  getDebounceJobId = (id: string): Promise<string | null> => this.getDeduplicationJobId(id)
  /** @deprecated BullMQ's old name for removeDeduplicationKey. */
  removeDebounceKey = (id: string): Promise<number> => this.removeDeduplicationKey(id)

  // Workers and the connection (queue/workers.ts)

  /** BullMQ's getWorkers(): the workers' connections as CLIENT LIST shows them (queue/workers.ts; EchoMQError when refused). */
  getWorkers = (): Promise<Record<string, string>[]> => queueWorkers(this.core)
  /** BullMQ's getWorkersCount(): how many workers getWorkers() lists. */
  getWorkersCount = async (): Promise<number> => (await this.getWorkers()).length

  /** Resolves once the connection answers (BullMQ's waitUntilReady): the client, for a caller that wants it. */
  async waitUntilReady(): Promise<RedisClient> {
    this.core.assertOpen()
    await this.core.call('connect to Redis for queue', () => ping(this.client))
    return this.client
  }

  /** Closes the connection (if EchoMQ opened it) after the calls in flight are answered (QUIT), within 2 s
   * whatever Redis does (QUIT_TIMEOUT_MS; at once when the connection is down): no reconnect is waited for.
   * Calls Redis has not answered then fail with ERR_CLOSED. Safe to call more than once. */
  close(): Promise<void> {
    const core = this.core
    core.closing ??= closeConnection(core.conn).finally(() => {
      this.unwatchErrors?.()
      for (const fail of core.waiting) fail()
    })
    return core.closing
  }

  // Events: BullMQ's typed QueueListener, for what this Queue's own calls did

  override on<U extends keyof QueueListener<J<Data, Result, Name>>>(event: U, listener: QueueListener<J<Data, Result, Name>>[U]): this {
    if (event === 'error' && !this.unwatchErrors && !this.core.closing) {
      // Once an outage, explained as the Worker's (ERR_CONNECTION naming where it goes): calls wait through reconnects.
      const { conn, name } = this.core
      const explain = (err: Error) => connectionFailure(conn, name, 'connect to Redis (retrying) for queue', err)
      this.unwatchErrors = watchOutages(conn.client, (err) => this.listenerCount('error') > 0 && this.emit('error', explain(err)))
    }
    return super.on(event, listener)
  }

  override once<U extends keyof QueueListener<J<Data, Result, Name>>>(event: U, listener: QueueListener<J<Data, Result, Name>>[U]): this {
    return super.once(event, listener)
  }

  override off<U extends keyof QueueListener<J<Data, Result, Name>>>(event: U, listener: QueueListener<J<Data, Result, Name>>[U]): this {
    return super.off(event, listener)
  }

  override emit<U extends keyof QueueListener<J<Data, Result, Name>>>(
    event: U,
    ...args: ListenerArgs<QueueListener<J<Data, Result, Name>>[U]>
  ): boolean {
    return super.emit(event, ...args)
  }
}

/** Each Queue's core, for the modules of the library that act as its Queue does (lib/flows/). */
const cores = new WeakMap<object, QueueCore>()
export const queueCoreOf = (queue: Queue): QueueCore => cores.get(queue) as QueueCore

/** The Job type of a Queue's type parameters. */
type J<Data, Result, Name extends string> = Job<Data, Result, Name>
