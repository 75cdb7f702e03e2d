/**
 * Queue: the producer's side, and the operator's. `add` (and `addBulk`) stores jobs and pushes them on
 * `wait` (or on `delayed`, with a `delay`) in one script; an existing `jobId` returns the job already
 * stored and changes nothing. The getters (`getJob`, `getJobs`, `getJobCounts`, `getJobLogs`) read, and
 * `retryJobs`, `remove`, `pause`/`resume`, `drain`, `clean` and `obliterate` act, with BullMQ's names and
 * signatures. Inputs are validated before any Redis call, so a rejected call changes nothing. A Queue
 * emits BullMQ's QueueListener events for what its own calls did (waiting, paused, resumed, removed,
 * cleaned, progress; error while someone listens).
 *
 * Options: connection (ioredis client or URL; default REDIS_URL, then redis://127.0.0.1:6379),
 * prefix ('emq'), maxDataBytes (1 MiB: the largest JSON text accepted as job data), defaultJobOptions
 * (see job-options.ts), streams.events.maxLen (the events stream's cap, 10,000).
 */
import { EventEmitter } from 'node:events'
import { deduplicationOption, KnownHolders } from './deduplication.js'
import { EchoMQError, redisError } from './errors.js'
import { type BullJobState, JOB_STATES, Job, type JobScope, type JobState, jobFromHash, type QueueCounts } from './job.js'
import { jobChanges } from './job-changes.js'
import { addSettings, type JobOptions } from './job-options.js'
import { jobOpts } from './job-opts.js'
import { toJson } from './json.js'
import type { JobProgress, ListenerArgs, QueueListener, Untyped } from './listeners.js'
import { type QueueSettings, queueSettings, validateJobId, validateJobName, validateNewJobId, validateQueueName } from './options.js'
import { cleanSet, drainQueue, obliterateQueue } from './queue/cleanup.js'
import { countTypes, DEFAULT_COUNT_TYPES, idsOfTypes, type JobType, jobTypes } from './queue/getters.js'
import { JobIds } from './queue/job-ids.js'
import { addedOption, jobScope } from './queue/job-scope.js'
import { checkMetricsArgs, type Metrics, readMetrics } from './queue/metrics.js'
import { getWorkers } from './queue/workers.js'
import * as commands from './redis/commands.js'
import {
  type Connection,
  closeConnection,
  lastConnectionError,
  openConnection,
  type RedisClient,
  redactUrl,
  resilient,
  resolveUrl,
} from './redis/connection.js'
import type { ConnectionOptions } from './redis/connection-options.js'
import { holderOf, removeHold } from './redis/deduplication.js'
import { encodeBackoff, encodeKeep } from './redis/job-codec.js'
import { type QueueKeys, queueKeys } from './redis/keys.js'
import {
  failedUpTo,
  idsIn,
  isPaused,
  jobState,
  newestFailedScore,
  ping,
  rateLimitTtl,
  readCounts,
  readJob,
  readJobs,
  readLogs,
  reserveJobIds,
  schedulerCount,
  setEventsMaxLen,
} from './redis/queries.js'
import { registration } from './registry.js'
import { parseIteration, promoteIterationNow } from './schedulers/iterations.js'
import {
  getScheduler,
  type JobScheduler,
  type JobTemplate,
  listSchedulers,
  type RepeatOptions,
  removeScheduler,
  upsertScheduler,
} from './schedulers/schedulers.js'
import { checkInteger, checkKnown, describe, fail, opt } from './validate.js'

export type { JobOptions } from './job-options.js'
export type { JobType } from './queue/getters.js'
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

/** A job for addBulk, as BullMQ takes it. */
export interface BulkJob<Data = Untyped, Name extends string = string> {
  name: Name
  data: Data
  opts?: JobOptions
}

/** Most jobs one getJobs call returns (the options form), and most ids one retryJobs call names. */
export const MAX_JOBS_PER_CALL = 1_000
/**
 * How long a Queue's call waits for Redis, reconnects included: a Redis that accepts connections but never
 * answers (stopped, or behind a stalled link) fails the call with ERR_CONNECTION rather than holding it.
 * Every call is a few milliseconds of server time. A call that timed out may still be applied when Redis
 * answers later: add() again with the same jobId (an existing jobId changes nothing).
 */
const COMMAND_TIMEOUT_MS = 5_000
/** Failed jobs sent back per script call when retryJobs walks `failed`. */
const RETRY_BATCH = 100
/** Most jobs, and bytes of job data, in one script call of addBulk (all calls of one addBulk go in one MULTI). */
const BULK_JOBS_PER_CALL = 200
const BULK_BYTES_PER_CALL = commands.TAKE_MAX_BYTES
/** Most jobs one addBulk takes: the whole bulk is one transaction, which holds Redis while it runs. */
export const MAX_BULK_JOBS = 100_000

/** Rounds of fresh ids addBulk tries for generated ids that were taken before it gives up. */
const ID_ROUNDS = 5

/** Jobs in calls of at most BULK_JOBS_PER_CALL jobs and BULK_BYTES_PER_CALL bytes of data. */
function bulkCalls<T extends { job: commands.NewJob }>(jobs: T[]): T[][] {
  const calls: T[][] = [[]]
  let bytes = 0
  for (const j of jobs) {
    const call = calls[calls.length - 1] as T[]
    const size = j.job.data.length
    if (call.length > 0 && (call.length >= BULK_JOBS_PER_CALL || bytes + size > BULK_BYTES_PER_CALL)) {
      calls.push([j])
      bytes = size
    } else {
      call.push(j)
      bytes += size
    }
  }
  return calls
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
  private readonly settings: QueueSettings
  private readonly conn: Connection
  private readonly register: () => Promise<unknown>
  private closing: Promise<void> | undefined
  /** Where a connection EchoMQ opened goes (password masked), named in its connection errors. */
  private readonly where: string | undefined
  /** Calls waiting on Redis: close() fails them, as a connection closed while reconnecting never answers. */
  private readonly waiting = new Set<() => void>()
  /** What the jobs this queue gives out act through (unfenced: no run owns them here). */
  private readonly scope: JobScope
  /** The ids of jobs added without one. */
  private readonly ids: JobIds
  /** The holders of the deduplication ids this queue added with (lib/deduplication.ts). */
  private readonly known = new KnownHolders()

  /** The connection's errors, passed on to this Queue's `error` listeners (none: not emitted). */
  private readonly onClientError = (err: Error) => {
    if (this.listenerCount('error') > 0) this.emit('error', err)
  }
  /** Whether onClientError listens to the client: from the first `error` listener on (a client may serve many queues). */
  private watchingErrors = false

  constructor(name: string, options?: QueueOptions) {
    super()
    this.name = validateQueueName(name)
    const { connection, ...settings } = queueSettings(options)
    this.settings = settings
    this.keys = queueKeys(settings.prefix, this.name)
    this.conn = openConnection(connection, { redisOptions: resilient(undefined, COMMAND_TIMEOUT_MS) })
    this.where = this.conn.owned ? `Redis at ${redactUrl(resolveUrl(connection))}` : undefined
    this.register = registration(this.conn.client, settings.prefix, this.name, () => performance.now())
    void this.register()
    if (settings.eventsMaxLen !== undefined) {
      void setEventsMaxLen(this.conn.client, this.keys, settings.eventsMaxLen).catch(() => undefined)
    }
    const call = <T>(what: string, fn: () => Promise<T>) => this.call(what, fn)
    const changes = jobChanges({ client: this.conn.client, keys: this.keys, queue: this.name, maxDataBytes: settings.maxDataBytes, call })
    this.scope = jobScope(
      this.conn.client,
      this.keys,
      this.name,
      call,
      this,
      (id, progress) => this.emit('progress', id, progress as JobProgress),
      changes,
    )
    this.ids = new JobIds((n) => reserveJobIds(this.conn.client, this.keys, n))
  }

  private watchErrors(event: string): void {
    if (event !== 'error' || this.watchingErrors || this.closing) return
    this.watchingErrors = true
    this.conn.client.on('error', this.onClientError)
  }

  /** BullMQ's typed events (QueueListener): what this Queue's own calls did. */
  override on<U extends keyof QueueListener<Job<Data, Result, Name>>>(event: U, listener: QueueListener<Job<Data, Result, Name>>[U]): this {
    this.watchErrors(event)
    return super.on(event, listener)
  }

  override once<U extends keyof QueueListener<Job<Data, Result, Name>>>(
    event: U,
    listener: QueueListener<Job<Data, Result, Name>>[U],
  ): this {
    return super.once(event, listener)
  }

  override off<U extends keyof QueueListener<Job<Data, Result, Name>>>(
    event: U,
    listener: QueueListener<Job<Data, Result, Name>>[U],
  ): this {
    return super.off(event, listener)
  }

  override emit<U extends keyof QueueListener<Job<Data, Result, Name>>>(
    event: U,
    ...args: ListenerArgs<QueueListener<Job<Data, Result, Name>>[U]>
  ): boolean {
    return super.emit(event, ...args)
  }

  get client(): RedisClient {
    return this.conn.client
  }

  /** Adds a job; an existing `jobId` resolves to the job already stored, unchanged. */
  async add(name: Name, data: Data, options?: JobOptions): Promise<Job<Data, Result, Name>> {
    this.assertOpen()
    // addBulk of one, without its arrays: the path every producer takes for every job.
    const job = this.newJob(name, data, options)
    const generated = job.id === ''
    void this.register()
    for (let round = 0, needId = generated; ; round++) {
      if (needId) job.id = (this.ids.takeNow(1) ?? (await this.call('add to queue', () => this.ids.take(1))))[0] as string
      needId = false
      this.known.guess([job])
      const reply = await this.call('add to queue', () => commands.add(this.client, this.keys, [job]))
      this.learn(job, reply, 0)
      if (reply.added[0]) return this.announce(this.added(job, data, reply.createdOn))
      // Deduplicated: as BullMQ's add, the job asked for under the holder's id (no read: one round trip).
      const holder = reply.heldBy[0]
      if (holder !== undefined) return this.added({ ...job, id: holder }, data, reply.createdOn)
      if (round + 1 === ID_ROUNDS) {
        const what = reply.stale[0] !== undefined ? 'the holder of its deduplication id changed' : 'generated job ids were taken'
        throw new EchoMQError('ERR_SCRIPT', `queue ${this.name}: ${ID_ROUNDS} times in a row, ${what}`)
      }
      // Its deduplication id has another holder than the one expected: sent again, expecting that one.
      if (reply.stale[0] !== undefined) continue
      // A generated id that is taken (the counter was reset while jobs remained) gets the next one.
      if (!generated) break
      needId = true
    }
    const existing = await this.getJob(job.id)
    if (!existing) throw new EchoMQError('ERR_SCRIPT', `job ${job.id} in queue ${this.name} vanished while being added`)
    return existing
  }

  /**
   * Adds jobs all or none: each is validated first (a bad one rejects the call and nothing is written),
   * then they go in calls of at most BULK_JOBS_PER_CALL jobs and 1 MiB of data, sent in one MULTI.
   * Resolves to the jobs in the order given (an existing `jobId`: the job already stored).
   */
  async addBulk(jobs: BulkJob<Data, Name>[]): Promise<Job<Data, Result, Name>[]> {
    this.assertOpen()
    if (!Array.isArray(jobs) || jobs.length > MAX_BULK_JOBS) {
      const got = Array.isArray(jobs) ? `an array of ${jobs.length} jobs` : describe(jobs)
      fail('ERR_OPTIONS', `expected addBulk to be given an array of at most ${MAX_BULK_JOBS} jobs, got: ${got}`)
    }
    if (jobs.length === 0) return []
    const news = jobs.map((j, i) => {
      const o = checkKnown(`addBulk job ${i}`, j, ['name', 'data', 'opts'])
      return this.newJob(o.name, o.data, o.opts)
    })
    const unnamed = news.filter((j) => j.id === '')
    const out: (Job<Data, Result, Name> | undefined)[] = []
    await this.call('add to queue', async () => {
      const fresh = await this.ids.take(unnamed.length)
      for (const [i, j] of unnamed.entries()) j.id = fresh[i] as string
      void this.register()
      let pending = news.map((job, index) => ({ job, index, generated: unnamed.includes(job) }))
      // A generated id that is taken (the counter was reset while jobs remained) gets the next one; a job
      // whose deduplication id changed holder since it was read is sent again.
      for (let round = 0; pending.length > 0; round++) {
        if (round === ID_ROUNDS)
          throw new EchoMQError('ERR_SCRIPT', `queue ${this.name}: ${ID_ROUNDS} generated job ids in a row were taken`)
        this.known.guess(pending.map((p) => p.job))
        const calls = bulkCalls(pending)
        const replies = await commands.addAll(
          this.client,
          this.keys,
          calls.map((c) => c.map((p) => p.job)),
        )
        const retry: typeof pending = []
        const taken: typeof pending = []
        for (const [c, reply] of replies.entries()) {
          for (const [i, p] of (calls[c] as typeof pending).entries()) {
            const holder = reply.heldBy[i]
            this.learn(p.job, reply, i)
            if (reply.added[i]) out[p.index] = this.announce(this.added(p.job, jobs[p.index]?.data as Data, reply.createdOn))
            else if (holder !== undefined) out[p.index] = this.added({ ...p.job, id: holder }, jobs[p.index]?.data as Data, reply.createdOn)
            else if (reply.stale[i] !== undefined) retry.push(p)
            else if (p.generated) taken.push(p)
          }
        }
        const again = await this.ids.take(taken.length)
        for (const [i, p] of taken.entries()) p.job.id = again[i] as string
        pending = [...retry, ...taken]
      }
    })
    // An existing custom jobId: the job already stored.
    for (const [i, j] of news.entries()) {
      if (out[i]) continue
      const existing = await this.getJob(j.id)
      if (!existing) throw new EchoMQError('ERR_SCRIPT', `job ${j.id} in queue ${this.name} vanished while being added`)
      out[i] = existing
    }
    return out as Job<Data, Result, Name>[]
  }

  /** The job, or undefined when there is none (as BullMQ). */
  async getJob(id: string): Promise<Job<Data, Result, Name> | undefined> {
    this.assertOpen()
    validateJobId(id)
    const hash = await this.call('read job of queue', () => readJob(this.client, this.keys, id))
    return Object.keys(hash).length === 0 ? undefined : (jobFromHash(id, hash, this.scope) as Job<Data, Result, Name>)
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
  async getJobs(types?: JobType | JobType[], start?: number | { start?: number; end?: number }, end?: number, asc?: boolean) {
    this.assertOpen()
    if (typeof start === 'object' && start !== null) return this.page(types, start)
    const list = jobTypes(types, 'getJobs types')
    const from = opt(start, 0, (v) => checkInteger('start', v, { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }))
    const to = opt(end, -1, (v) => checkInteger('end', v, { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }))
    const ascending = opt(asc, false, (v) => {
      if (typeof v !== 'boolean') fail('ERR_OPTIONS', `expected asc to be true or false, got: ${describe(v)}`)
      return v
    })
    const all: JobType[] = list.length > 0 ? list : ['active', 'completed', 'delayed', 'failed', 'prioritized', 'waiting']
    const ids = await this.call('list jobs of queue', () => idsOfTypes(this.client, this.keys, all, from, to, ascending))
    return this.jobsOf(ids)
  }

  /** The ids getJobs would read (BullMQ's getRanges): the same types, ranks and order, without the jobs. */
  async getRanges(types?: JobType | JobType[], start = 0, end = -1, asc = false): Promise<string[]> {
    this.assertOpen()
    const list = jobTypes(types, 'getRanges types')
    checkInteger('start', start, { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER })
    checkInteger('end', end, { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER })
    const all: JobType[] = list.length > 0 ? list : ['active', 'completed', 'delayed', 'failed', 'prioritized', 'waiting']
    return this.call('list job ids of queue', () => idsOfTypes(this.client, this.keys, all, start, end, asc === true))
  }

  /** Counts per type, keyed as asked (BullMQ's getJobCounts; none: BullMQ 6's default types). */
  async getJobCounts(...types: JobType[]): Promise<Record<string, number>> {
    this.assertOpen()
    const list = jobTypes(types, 'getJobCounts types')
    return this.call('count jobs of queue', () => countTypes(this.client, this.keys, list.length > 0 ? list : DEFAULT_COUNT_TYPES))
  }

  /** The sum of getJobCounts over `types` (none: BullMQ 6's default types). */
  async getJobCountByTypes(...types: JobType[]): Promise<number> {
    const counts = await this.getJobCounts(...jobTypes(types, 'getJobCountByTypes types'))
    return Object.values(counts).reduce((a, b) => a + b, 0)
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
  /** Always [] (EchoMQ has no flows, so no job waits for children). */
  getWaitingChildren = async (_start = 0, _end = -1): Promise<Job<Data, Result, Name>[]> => {
    this.assertOpen()
    return []
  }

  /**
   * Finished jobs per minute, BullMQ's shape ({ meta: { count, prevTS, prevCount }, data, count }), over
   * the last hour EchoMQ keeps for every queue (see queue/metrics.ts for how it differs from BullMQ's).
   */
  async getMetrics(type: 'completed' | 'failed', start = 0, end = -1): Promise<Metrics> {
    this.assertOpen()
    checkMetricsArgs(type, start, end)
    return this.call('read the metrics of queue', () => readMetrics(this.client, this.keys, type, start, end))
  }

  /** Records a job's progress (a `progress` event here and in QueueEvents), as BullMQ's updateJobProgress. */
  async updateJobProgress(jobId: string, progress: JobProgress): Promise<void> {
    this.assertOpen()
    validateJobId(jobId)
    await this.scope.updateProgress({ id: jobId } as Job, progress, undefined)
  }

  /** Appends a line to a job's log (BullMQ's addJobLog); the job's own keepLogs bounds it. */
  async addJobLog(jobId: string, logRow: string): Promise<number> {
    this.assertOpen()
    validateJobId(jobId)
    return this.scope.log({ id: jobId } as Job, logRow, undefined)
  }

  /** A job's log lines, `start`..`end` (inclusive; negative from the end), oldest first unless `asc` is false. */
  async getJobLogs(id: string, start = 0, end = -1, asc = true): Promise<{ logs: string[]; count: number }> {
    this.assertOpen()
    validateJobId(id)
    checkInteger('start', start, { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER })
    checkInteger('end', end, { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER })
    // Newest first: the same ranks counted from the end, then reversed.
    const [from, to] = asc ? [start, end] : [-(end + 1), -(start + 1)]
    const [logs, count] = await this.call('read the log of a job of queue', () => readLogs(this.client, this.keys, id, from, to))
    return { logs: asc ? logs : logs.reverse(), count }
  }

  /** Every worker of the queue, on every host, stops taking jobs (running ones finish); adds and recoveries go on. */
  async pause(): Promise<void> {
    this.assertOpen()
    await this.call('pause queue', () => commands.setPaused(this.client, this.keys, true))
    this.emit('paused')
  }

  /** Workers take jobs again. */
  async resume(): Promise<void> {
    this.assertOpen()
    await this.call('resume queue', () => commands.setPaused(this.client, this.keys, false))
    this.emit('resumed')
  }

  async isPaused(): Promise<boolean> {
    this.assertOpen()
    return this.call('read the state of queue', () => isPaused(this.client, this.keys))
  }

  /**
   * Creates or changes job scheduler `id` (BullMQ's upsertJobScheduler): `repeat` is { every } (ms; the
   * first run at once) or { pattern } (cron, in `tz`), with limit, startDate, endDate, immediately, offset;
   * `template` is { name, data, opts } of the jobs it makes. Resolves to the first run's job, or undefined
   * when there is none (past its endDate). Upserting the same timing again keeps the schedule and its
   * newest run (new template), so no run is duplicated.
   */
  async upsertJobScheduler(
    id: string,
    repeat: RepeatOptions,
    template?: JobTemplate<Data, Name>,
  ): Promise<Job<Data, Result, Name> | undefined> {
    this.assertOpen()
    const { defaultJobOptions, maxDataBytes } = this.settings
    void this.register()
    const first = await this.call('upsert a job scheduler of queue', () =>
      upsertScheduler(this.client, this.keys, id, repeat, template ?? {}, defaultJobOptions, maxDataBytes),
    )
    return first === undefined ? undefined : ((await this.getJob(first)) ?? undefined)
  }

  /** Job scheduler `id` ({ key, name, next, pattern | every, tz, limit, template, ... }), undefined when there is none. */
  async getJobScheduler(id: string): Promise<JobScheduler | undefined> {
    this.assertOpen()
    validateJobId(id)
    return this.call('read a job scheduler of queue', () => getScheduler(this.client, this.keys, id))
  }

  /** Job schedulers by when their next period is due (`asc`: soonest first); ranks as in Redis. */
  async getJobSchedulers(start = 0, end = -1, asc = false): Promise<JobScheduler[]> {
    this.assertOpen()
    checkInteger('start', start, { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER })
    checkInteger('end', end, { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER })
    return this.call('list the job schedulers of queue', () => listSchedulers(this.client, this.keys, start, end, asc === true))
  }

  /** How many job schedulers the queue has (BullMQ's getJobSchedulersCount). */
  async getJobSchedulersCount(): Promise<number> {
    this.assertOpen()
    return this.call('count the job schedulers of queue', () => schedulerCount(this.client, this.keys))
  }

  /** Removes job scheduler `id` and its newest run if no worker started it (a `removed` event); resolves to whether there was one. */
  async removeJobScheduler(id: string): Promise<boolean> {
    this.assertOpen()
    return this.call('remove a job scheduler of queue', () => removeScheduler(this.client, this.keys, id))
  }

  /**
   * Holds every worker of the queue, on every host, back from starting jobs for `ms` (BullMQ's rateLimit):
   * for a processor that learnt from an API that it must back off, before it throws Worker.RateLimitError().
   */
  async rateLimit(ms: number): Promise<void> {
    this.assertOpen()
    checkInteger('ms', ms, { min: 0, max: 2 ** 31 - 1, unit: 'ms' })
    await this.call('rate-limit queue', () => commands.rateLimit(this.client, this.keys, ms))
  }

  /**
   * BullMQ's getRateLimitTtl(maxJobs?): ms left before the queue may start jobs again (a rateLimit hold, or
   * the worker limiters' window, counted with maxJobs only when it holds that many starts); -2 (0 with
   * maxJobs) when nothing limits it. redis/queries.ts rateLimitTtl says how.
   */
  async getRateLimitTtl(maxJobs?: number): Promise<number> {
    if (maxJobs !== undefined && (!Number.isInteger(maxJobs) || maxJobs < 0))
      throw new EchoMQError('ERR_OPTIONS', `expected maxJobs to be an integer >= 0, got: ${String(maxJobs)}`)
    this.assertOpen()
    return this.call('read the rate limit of queue', () => rateLimitTtl(this.client, this.keys, maxJobs || undefined))
  }

  /** Removes every waiting job, and with `delayed` every delayed one, with their logs (BullMQ's drain). */
  async drain(delayed = false): Promise<void> {
    this.assertOpen()
    if (typeof delayed !== 'boolean') fail('ERR_OPTIONS', `expected drain's delayed to be true or false, got: ${describe(delayed)}`)
    await this.call('drain queue', () => drainQueue(this.client, this.keys, delayed))
  }

  /**
   * Removes up to `limit` jobs (0: no limit) of `type` ('completed' or 'failed') that finished at least
   * `grace` ms ago, oldest first, with their logs; resolves to their ids (BullMQ's clean).
   */
  async clean(grace: number, limit = 0, type: 'completed' | 'failed' = 'completed'): Promise<string[]> {
    this.assertOpen()
    checkInteger('grace', grace, { min: 0, max: Number.MAX_SAFE_INTEGER, unit: 'ms' })
    checkInteger('limit', limit, { min: 0, max: Number.MAX_SAFE_INTEGER })
    if (type !== 'completed' && type !== 'failed')
      fail('ERR_OPTIONS', `expected clean's type to be completed or failed, got: ${describe(type)}`)
    const ids = await this.call(`clean ${type} jobs of queue`, () => cleanSet(this.client, this.keys, type, grace, limit))
    this.emit('cleaned', ids, type)
    return ids
  }

  /**
   * Deletes the queue: every job, its log and lease, the queue's keys and its registry entry, in bounded
   * steps; it is paused first, so no worker takes a job meanwhile. Refused with ERR_QUEUE_ACTIVE (nothing
   * deleted, the queue left paused) while jobs are in flight, unless `force`.
   */
  async obliterate(options?: { force?: boolean }): Promise<void> {
    this.assertOpen()
    const o = checkKnown('obliterate', options, ['force'])
    const force = opt(o.force, false, (v) => {
      if (typeof v !== 'boolean') fail('ERR_OPTIONS', `expected force to be true or false, got: ${describe(v)}`)
      return v
    })
    // Paused first, as BullMQ does, so no worker takes a job meanwhile; a refused call (jobs in flight,
    // not forced) leaves the queue as it found it.
    const pausedHere = await this.call('pause queue', () => commands.setPaused(this.client, this.keys, true))
    try {
      await this.call('obliterate queue', () => obliterateQueue(this.client, this.keys, this.settings.prefix, this.name, force))
    } catch (err) {
      if (pausedHere && err instanceof EchoMQError && err.code === 'ERR_QUEUE_ACTIVE') await this.resume()
      throw err
    }
  }

  /**
   * Sends failed jobs back to `wait` with a fresh attempts budget, keeping their history (the last error
   * in `lastError`, all runs in `attemptsStarted`). `ids`: those jobs, every one of which must be failed
   * (else ERR_JOB_STATE and nothing changes); otherwise the oldest failed jobs, at most `limit` (all).
   * Resolves to the ids moved.
   */
  async retryJobs(options?: { ids?: string[]; limit?: number }): Promise<string[]> {
    this.assertOpen()
    const o = checkKnown('retryJobs', options, ['ids', 'limit'])
    if (o.ids !== undefined && o.limit !== undefined) fail('ERR_OPTIONS', 'retryJobs takes ids or limit, not both')
    if (o.ids !== undefined) {
      if (!Array.isArray(o.ids) || o.ids.length === 0 || o.ids.length > MAX_JOBS_PER_CALL) {
        fail('ERR_OPTIONS', `expected ids to be an array of 1-${MAX_JOBS_PER_CALL} job ids, got: ${describe(o.ids)}`)
      }
      const ids = [...new Set(o.ids.map((id) => validateJobId(id)))]
      const { moved, notFailed } = await this.call('retry failed jobs of queue', () => commands.retry(this.client, this.keys, ids, true))
      if (notFailed?.state === 'missing') {
        throw new EchoMQError('ERR_JOB_MISSING', `job ${notFailed.id} of queue ${this.name} does not exist; nothing was retried`)
      }
      if (notFailed !== undefined) {
        throw new EchoMQError(
          'ERR_JOB_STATE',
          `job ${notFailed.id} of queue ${this.name} is ${notFailed.state}, not failed; nothing was retried`,
        )
      }
      return moved
    }
    const limit = opt(o.limit, Number.POSITIVE_INFINITY, (v) => checkInteger('limit', v, { min: 1, max: Number.MAX_SAFE_INTEGER }))
    // Only the jobs failed when the call began, each once: with workers failing them again meanwhile (the
    // downstream is still down), re-reading `failed` from its start would send them back over and over.
    const bound = await this.call('retry failed jobs of queue', () => newestFailedScore(this.client, this.keys))
    if (bound === undefined) return []
    const moved = new Set<string>()
    // Jobs this call retried that failed again within the same millisecond as `bound` are still in range:
    // stepped over, not retried twice.
    let skip = 0
    while (moved.size < limit) {
      const n = Math.min(RETRY_BATCH, limit - moved.size)
      const batch = await this.call('retry failed jobs of queue', async () => {
        const read = await failedUpTo(this.client, this.keys, bound, skip, n)
        const ids = read.filter((id) => !moved.has(id))
        skip += read.length - ids.length
        if (read.length === 0) return undefined
        return ids.length === 0 ? [] : (await commands.retry(this.client, this.keys, ids, false, bound)).moved
      })
      if (batch === undefined) break
      for (const id of batch) moved.add(id)
    }
    return [...moved]
  }

  /**
   * Moves a delayed job (a delayed add, or a retry waiting its backoff) to the back of `wait` now, due or
   * not (BullMQ's job.promote()). ERR_JOB_MISSING when there is no such job, ERR_JOB_STATE when it is not
   * delayed; nothing changes then.
   */
  async promoteJob(id: string): Promise<void> {
    this.assertOpen()
    validateJobId(id)
    const outcome = await this.call('promote a job of queue', async () => {
      if (!parseIteration(id)) return commands.promoteJob(this.client, this.keys, id)
      // A scheduler's pending run moves its schedule on as it leaves `delayed`, as when it falls due.
      if (await promoteIterationNow(this.client, this.keys, id)) return 'promoted'
      return ((await readJob(this.client, this.keys, id)).state as JobState | undefined) ?? 'missing'
    })
    if (outcome === 'missing') throw new EchoMQError('ERR_JOB_MISSING', `job ${id} of queue ${this.name} does not exist: nothing promoted`)
    if (outcome !== 'promoted')
      throw new EchoMQError('ERR_JOB_STATE', `job ${id} of queue ${this.name} is ${outcome}, not delayed: nothing promoted`)
  }

  /**
   * The id of the job that holds deduplication id `id` now, or null (BullMQ's getDeduplicationJobId): a
   * job that completed or failed holds an id added without a ttl no longer; one with a ttl until it passes.
   */
  async getDeduplicationJobId(id: string): Promise<string | null> {
    this.assertOpen()
    deduplicationOption({ id }, undefined)
    return this.call('read a deduplication id of queue', () => holderOf(this.client, this.keys, id))
  }

  /** Releases deduplication id `id` whoever holds it (BullMQ's removeDeduplicationKey): 1 when it was held, else 0. */
  async removeDeduplicationKey(id: string): Promise<number> {
    this.assertOpen()
    deduplicationOption({ id }, undefined)
    return this.call('remove a deduplication id of queue', () => removeHold(this.client, this.keys, id))
  }

  /** @deprecated BullMQ's old name for getDeduplicationJobId. */
  getDebounceJobId = (id: string): Promise<string | null> => this.getDeduplicationJobId(id)
  /** @deprecated BullMQ's old name for removeDeduplicationKey. */
  removeDebounceKey = (id: string): Promise<number> => this.removeDeduplicationKey(id)

  /** A job's state now, under BullMQ's names: `waiting` for `wait`, `unknown` when there is no such job. */
  async getJobState(id: string): Promise<BullJobState> {
    this.assertOpen()
    validateJobId(id)
    const state = await this.call('read the state of a job of queue', () => jobState(this.client, this.keys, id))
    return state === undefined ? 'unknown' : state === 'wait' ? 'waiting' : state
  }

  /** Resolves once the connection answers (BullMQ's waitUntilReady): the client, for a caller that wants it. */
  async waitUntilReady(): Promise<RedisClient> {
    this.assertOpen()
    await this.call('connect to Redis for queue', () => ping(this.client))
    return this.client
  }

  /**
   * Removes a job that is not in flight, with its log, as BullMQ's remove: resolves to 1, or to 0 when the
   * job is in flight (BullMQ: locked) and was left alone. An id with no job resolves to 1, as in BullMQ
   * (nothing was locked); `removed` is emitted on this Queue for a 1. `opts.removeChildren` is accepted
   * (EchoMQ has no flows, so a job has no children). removeJob says more.
   */
  async remove(id: string, opts?: { removeChildren?: boolean }): Promise<0 | 1> {
    checkKnown('remove', opts, ['removeChildren'])
    const outcome = await this.removeOutcome(id)
    if (outcome === 'active') return 0
    this.emit('removed', id)
    return 1
  }

  /** EchoMQ's remove: resolves to whether there was such a job; ERR_JOB_ACTIVE (nothing removed) for one in flight. */
  async removeJob(id: string): Promise<boolean> {
    const outcome = await this.removeOutcome(id)
    if (outcome === 'active') throw new EchoMQError('ERR_JOB_ACTIVE', `job ${id} of queue ${this.name} is in flight; it was not removed`)
    if (outcome === 'removed') this.emit('removed', id)
    return outcome === 'removed'
  }

  private async removeOutcome(id: string): Promise<'removed' | 'missing' | 'active'> {
    this.assertOpen()
    validateJobId(id)
    return this.call('remove a job of queue', () => commands.remove(this.client, this.keys, id))
  }

  /**
   * BullMQ's getWorkers(): this queue's workers as CLIENT LIST shows their connections (`name` is the
   * queue's, `rawname` the connection's: `<prefix>:<base64(queue)>:w:<worker name>`). A Redis that refuses
   * CLIENT LIST gets an EchoMQError (see queue/workers.ts).
   */
  async getWorkers(): Promise<Record<string, string>[]> {
    this.assertOpen()
    return this.call('list the workers of queue', () => getWorkers(this.client, this.settings.prefix, this.name))
  }

  /** BullMQ's getWorkersCount(): how many workers getWorkers() lists. */
  async getWorkersCount(): Promise<number> {
    return (await this.getWorkers()).length
  }

  async counts(): Promise<QueueCounts> {
    this.assertOpen()
    return this.call('count jobs of queue', () => readCounts(this.client, this.keys))
  }

  /** Closes the connection (if EchoMQ opened it) after the calls in flight are answered; calls Redis
   * cannot answer (it is unreachable) fail with ERR_CLOSED. Safe to call more than once. */
  close(): Promise<void> {
    this.closing ??= closeConnection(this.conn).finally(() => {
      this.conn.client.off('error', this.onClientError)
      for (const fail of this.waiting) fail()
    })
    return this.closing
  }

  /** A job of add or addBulk, validated and encoded; id '' for EchoMQ to give. */
  private newJob(jobName: unknown, data: unknown, options: unknown): commands.NewJob {
    const name = validateJobName(jobName)
    const { jobId, attempts, delay, backoff, removeOnComplete, removeOnFail, keepLogs, priority, lifo, stackTraceLimit, deduplication } =
      addSettings(options, this.settings.defaultJobOptions)
    return {
      ...(deduplication ? { deduplication: { spec: deduplication, holder: null } } : {}),
      id: jobId === undefined ? '' : validateNewJobId(jobId),
      name,
      data: toJson(data, 'job data', this.settings.maxDataBytes, 'maxDataBytes'),
      attempts,
      delayMs: delay,
      backoff: encodeBackoff(backoff),
      keep: encodeKeep(removeOnComplete),
      keepFailed: encodeKeep(removeOnFail),
      keepLogs,
      priority,
      lifo,
      stackTraceLimit,
    }
  }

  /** The Job add returns for a job it added: what was stored, without a read. */
  private added(j: commands.NewJob, data: Data, createdOn: number): Job<Data, Result, Name> {
    const opts = jobOpts(j.id, createdOn, j.attempts, (f) => addedOption(j, f))
    const fields = { id: j.id, name: j.name as Name, data, attempts: j.attempts, attemptsMade: 0, attemptsStarted: 0, createdOn, opts }
    const state =
      j.delayMs > 0
        ? { state: 'delayed' as const, dueAt: createdOn + j.delayMs }
        : { state: j.priority > 0 ? ('prioritized' as const) : ('wait' as const) }
    const dedup = j.deduplication ? { deduplicationId: j.deduplication.spec.id } : {}
    return new Job<Data, Result, Name>({ ...fields, ...state, ...(j.priority > 0 ? { priority: j.priority } : {}), ...dedup }, this.scope)
  }

  /** What an add call said of the holder of job i's deduplication id, kept for the next add of that id. */
  private learn(job: commands.NewJob, reply: commands.AddResult, i: number): void {
    const id = job.deduplication?.spec.id
    if (id === undefined) return
    const stale = reply.stale[i]
    if (stale !== undefined) this.known.learn(id, stale)
    else if (reply.added[i]) this.known.learn(id, job.id)
    else if (reply.heldBy[i] !== undefined) this.known.learn(id, reply.heldBy[i] as string)
  }

  /** Emits `waiting` for a job this Queue added (BullMQ's QueueListener). */
  private announce(job: Job<Data, Result, Name>): Job<Data, Result, Name> {
    this.emit('waiting', job)
    return job
  }

  /** getJobs' options form: a page of one state (see getJobs). */
  private async page(state: unknown, range: { start?: number; end?: number }): Promise<Job<Data, Result, Name>[]> {
    const s = state === 'waiting' ? 'wait' : state
    if (!JOB_STATES.includes(s as JobState))
      fail('ERR_OPTIONS', `expected a state, one of ${JOB_STATES.join(', ')}, got: ${describe(state)}`)
    const r = checkKnown('getJobs', range, ['start', 'end'])
    const start = opt(r.start, 0, (v) => checkInteger('start', v, { min: 0, max: Number.MAX_SAFE_INTEGER }))
    const end = opt(r.end, start + 99, (v) => checkInteger('end', v, { min: start, max: start + MAX_JOBS_PER_CALL - 1 }))
    const ids = await this.call(`list ${String(s)} jobs of queue`, () => idsIn(this.client, this.keys, s as JobState, start, end))
    return this.jobsOf(ids)
  }

  /** The jobs of `ids` that still exist, in order. */
  private async jobsOf(ids: string[]): Promise<Job<Data, Result, Name>[]> {
    const hashes = await this.call('read jobs of queue', () => readJobs(this.client, this.keys, ids))
    return ids.flatMap((id, i) => {
      const hash = hashes[i] ?? {}
      return Object.keys(hash).length === 0 ? [] : [jobFromHash(id, hash, this.scope) as Job<Data, Result, Name>]
    })
  }

  /** Runs `fn`, failing with ERR_CLOSED if the queue closes first (one promise per call: every add takes this path). */
  private call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const fail = () => reject(new EchoMQError('ERR_CLOSED', `${what} ${this.name}: the queue was closed before Redis answered`))
      this.waiting.add(fail)
      let running: Promise<T>
      try {
        running = fn()
      } catch (err) {
        running = Promise.reject(err)
      }
      running.then(
        (value) => {
          this.waiting.delete(fail)
          resolve(value)
        },
        (err: unknown) => {
          this.waiting.delete(fail)
          const failure = redisError(this.name, what, err, lastConnectionError(this.client))
          if (failure.code === 'ERR_CONNECTION' && this.where) failure.message += ` (${this.where})`
          reject(failure)
        },
      )
    })
  }

  private assertOpen(): void {
    if (this.closing) throw new EchoMQError('ERR_CLOSED', `queue ${this.name} is closed`)
  }
}

/** A queue's counts, on a client the caller holds (the command's): see readCounts. */
export async function queueCounts(client: RedisClient, keys: QueueKeys, queue: string): Promise<QueueCounts> {
  try {
    return await readCounts(client, keys)
  } catch (err) {
    throw redisError(queue, 'count jobs of queue', err)
  }
}
