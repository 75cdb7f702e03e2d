/**
 * A job as stored in its hash, the conversion from the hash's fields, and a queue's job counts.
 *
 * A Job is data (what its hash holds, under EchoMQ's names and BullMQ's: `createdOn` is also `timestamp`,
 * `startedOn` also `processedOn`, `returnValue` also `returnvalue`) with a few methods that act through
 * the Queue or Worker it came from (its scope): `updateProgress` and `log` (fenced by the run's token for
 * the job a processor is given), `waitUntilFinished`. The scope is not an enumerable property, so a Job
 * compares, copies and serialises as its data.
 */
import { EchoMQError } from './errors.js'
import { decodeBackoff, decodeKeep, JOB_DEFAULTS, type StoredJobOptions } from './job-options.js'

/** Where a job is: `prioritized` is waiting with a priority (BullMQ's name). */
export type JobState = 'wait' | 'prioritized' | 'delayed' | 'active' | 'completed' | 'failed'

export const JOB_STATES: readonly JobState[] = ['wait', 'prioritized', 'delayed', 'active', 'completed', 'failed']

/**
 * A queue's job counts, each job counted once, in the state it is in: the fields add up to every job of
 * the queue. A busy worker's reservations are waiting jobs, counted where they came from.
 */
export interface QueueCounts {
  /** Waiting jobs without a priority (BullMQ's `waiting`). */
  wait: number
  /** Waiting jobs with a priority. */
  prioritized: number
  /** In-flight jobs no sweep has marked (BullMQ's `active` is this plus `stalled`). */
  active: number
  /** In-flight jobs a sweep has marked stalled: their lease lapsed, a later sweep recovers them. */
  stalled: number
  delayed: number
  completed: number
  failed: number
}

/**
 * The sizes a sweep reads for the reaper's gauges (WaitingCount, ActiveCount...; lua/probe-12.lua). Not
 * QueueCounts: `wait` is every waiting job (the backlog: prioritized and reserved ones included) and
 * `active` every job in flight (marked ones included); `prioritized` and `stalled` say how many of those.
 */
export interface SweepCounts {
  wait: number
  prioritized: number
  active: number
  stalled: number
  delayed: number
  completed: number
  failed: number
}

/** A job's state under BullMQ's names (`waiting` for `wait`; `unknown` for a job that does not exist). */
export type BullJobState = 'waiting' | 'prioritized' | 'delayed' | 'active' | 'completed' | 'failed' | 'unknown'

/** The Queue operations a Job's own methods use (job.remove() is queue.remove(job.id), and so on). */
export interface JobQueue {
  remove(id: string): Promise<boolean>
  retryJobs(options: { ids: string[] }): Promise<string[]>
  promoteJob(id: string): Promise<void>
  getJobState(id: string): Promise<BullJobState>
}

/** What a Job's methods act through: the Queue or Worker that gave it out (their Redis boundary). */
export interface JobScope {
  updateProgress(job: Job, progress: unknown, token: string | undefined): Promise<void>
  log(job: Job, row: string, token: string | undefined): Promise<number>
  waitUntilFinished(job: Job, queueEvents: unknown, ttl: number | undefined): Promise<unknown>
  queue(): JobQueue
}

/** The fields a Job is made from (what a hash holds, decoded). */
export interface JobFields<Data = unknown, Result = unknown> {
  id: string
  name: string
  data: Data
  /** Total starts allowed. */
  attempts: number
  /** Attempts used: runs that completed or failed (a stall uses none: stalledCounter). A run returned by a closing worker uses none. */
  attemptsMade: number
  /** Times a worker took the job (all runs, including those before a retry from `failed`). */
  attemptsStarted: number
  state: JobState
  failedReason?: string
  /** Error of the last attempt that did not succeed (kept when a failed job is retried). */
  lastError?: string
  returnValue?: Result
  /** ms, Redis's clock. */
  createdOn: number
  startedOn?: number
  finishedOn?: number
  /** When a delayed job (or a retry in backoff) is due (ms, Redis's clock). */
  dueAt?: number
  /** The `name` of the worker that took the job last. */
  workerName?: string
  /** Times the job was sent back from `failed` by retryJobs. */
  retried?: number
  /** What the processor last reported with updateProgress (0 until then). */
  progress?: unknown
  /** 0 for none, else 1 (highest) .. 2^21 - 1. */
  priority?: number
  /** The job scheduler that made this job (BullMQ's name), when one did. */
  repeatJobKey?: string
  /** The stacks of its failed runs, oldest first, at most `opts.stackTraceLimit` (BullMQ's name; [] for none). */
  stacktrace?: string[]
  /** The options it was added with (read by getJob and getJobs; BullMQ's `opts`). */
  opts?: StoredJobOptions
  /** Times the stalled sweep recovered it (BullMQ's name; its worker's maxStalledCount bounds it). */
  stalledCounter?: number
}

export class Job<Data = unknown, Result = unknown> implements JobFields<Data, Result> {
  declare id: string
  declare name: string
  declare data: Data
  declare attempts: number
  declare attemptsMade: number
  declare attemptsStarted: number
  declare state: JobState
  declare failedReason?: string
  declare lastError?: string
  declare returnValue?: Result
  declare createdOn: number
  declare startedOn?: number
  declare finishedOn?: number
  declare dueAt?: number
  declare workerName?: string
  declare retried?: number
  declare repeatJobKey?: string
  declare opts?: StoredJobOptions
  progress: unknown = 0
  stalledCounter = 0
  /** 0 for none (BullMQ's default too). */
  priority = 0
  stacktrace: string[] = []
  readonly #scope: JobScope | undefined
  /** The run's token, for the job a processor is given: its updateProgress and log are fenced by it. */
  readonly #token: string | undefined

  constructor(fields: JobFields<Data, Result>, scope?: JobScope, token?: string) {
    Object.assign(this, fields)
    this.#scope = scope
    this.#token = token
  }

  /** The run's token (BullMQ's job.token), for the job a processor is given. */
  get token(): string | undefined {
    return this.#token
  }

  /** BullMQ's name for createdOn. */
  get timestamp(): number {
    return this.createdOn
  }

  /** BullMQ's name for startedOn: when the last run started. */
  get processedOn(): number | undefined {
    return this.startedOn
  }

  /** BullMQ's name for returnValue. */
  get returnvalue(): Result | undefined {
    return this.returnValue
  }

  /**
   * Records the job's progress (a number or a JSON-serialisable object) and emits a `progress` event. For
   * the job a processor runs, only while the run owns the job: a run whose lease was lost gets
   * ERR_LOCK_LOST and changes nothing.
   */
  async updateProgress(progress: number | object): Promise<void> {
    await this.scope().updateProgress(this, progress, this.#token)
    this.progress = progress
  }

  /** Appends a line to the job's log; resolves to the number of lines kept (see the `keepLogs` option). */
  log(row: string): Promise<number> {
    return this.scope().log(this, row, this.#token)
  }

  /**
   * Resolves to the job's return value once it completes, rejects with its failure reason once it fails
   * for good, or with ERR_TIMEOUT after `ttl` ms. A job that finished before the call is answered at once.
   */
  waitUntilFinished(queueEvents: unknown, ttl?: number): Promise<Result> {
    return this.scope().waitUntilFinished(this, queueEvents, ttl) as Promise<Result>
  }

  /** Removes the job (ERR_JOB_ACTIVE while it runs: a running job is ended by its worker). */
  async remove(): Promise<void> {
    await this.scope().queue().remove(this.id)
  }

  /**
   * Sends a failed job back to `wait` with a fresh attempts budget (queue.retryJobs). BullMQ also retries
   * completed jobs; EchoMQ retries failed ones only (ERR_JOB_STATE otherwise): add a new job to run again.
   */
  async retry(state: 'failed' | 'completed' = 'failed'): Promise<void> {
    if (state !== 'failed')
      throw new EchoMQError('ERR_JOB_STATE', `job ${this.id}: only a failed job can be retried; add a new job to run it again`)
    await this.scope()
      .queue()
      .retryJobs({ ids: [this.id] })
    this.state = 'wait'
  }

  /** Moves a delayed job to `wait` now (queue.promoteJob). */
  async promote(): Promise<void> {
    await this.scope().queue().promoteJob(this.id)
    this.state = 'wait'
  }

  /** The job's state in Redis now, under BullMQ's names (`waiting`, ..., `unknown` once it is gone). */
  getState(): Promise<BullJobState> {
    return this.scope().queue().getJobState(this.id)
  }

  async isCompleted(): Promise<boolean> {
    return (await this.getState()) === 'completed'
  }

  async isFailed(): Promise<boolean> {
    return (await this.getState()) === 'failed'
  }

  async isDelayed(): Promise<boolean> {
    return (await this.getState()) === 'delayed'
  }

  async isActive(): Promise<boolean> {
    return (await this.getState()) === 'active'
  }

  async isWaiting(): Promise<boolean> {
    const state = await this.getState()
    return state === 'waiting' || state === 'prioritized'
  }

  private scope(): JobScope {
    if (!this.#scope) throw new Error(`job ${this.id} was not given out by a Queue or Worker, so it cannot act on its queue`)
    return this.#scope
  }
}

function parseJson(text: string | undefined): unknown {
  if (text === undefined) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const optionalNumber = (v: string | undefined) => (v === undefined ? undefined : Number(v))

/** The fields of a job from HGETALL output (an object, or the flat field/value list a script returns). */
export function fieldsFromHash(id: string, hash: Record<string, string> | string[]): JobFields {
  const h: Record<string, string> = {}
  if (Array.isArray(hash)) {
    for (let i = 0; i + 1 < hash.length; i += 2) h[hash[i] as string] = hash[i + 1] as string
  } else Object.assign(h, hash)
  const job: JobFields = {
    id,
    name: h.name ?? '',
    data: parseJson(h.data),
    attempts: Number(h.attempts ?? JOB_DEFAULTS.attempts),
    attemptsMade: Number(h.attemptsMade ?? 0),
    attemptsStarted: startsOf(h.token, h.attemptsStarted),
    state: (h.state ?? 'wait') as JobState,
    createdOn: Number(h.createdOn ?? 0),
    stacktrace: stacksOf(h.stacktrace),
  }
  if (h.failedReason !== undefined) job.failedReason = h.failedReason
  if (h.lastError !== undefined) job.lastError = h.lastError
  if (h.returnValue !== undefined) job.returnValue = parseJson(h.returnValue)
  const startedOn = optionalNumber(h.startedOn)
  if (startedOn !== undefined) job.startedOn = startedOn
  const finishedOn = optionalNumber(h.finishedOn)
  if (finishedOn !== undefined) job.finishedOn = finishedOn
  const dueAt = optionalNumber(h.dueAt)
  if (dueAt !== undefined && job.state === 'delayed') job.dueAt = dueAt
  if (h.workerName !== undefined) job.workerName = h.workerName
  const retried = optionalNumber(h.retried)
  if (retried !== undefined) job.retried = retried
  if (h.progress !== undefined) job.progress = parseJson(h.progress)
  if (h.priority !== undefined) job.priority = Number(h.priority)
  if (h.repeatJobKey !== undefined) job.repeatJobKey = h.repeatJobKey
  if (h.stalledCounter !== undefined) job.stalledCounter = Number(h.stalledCounter)
  job.opts = storedOptions(job.attempts, h)
  return job
}

/** The options a job was added with; a field the hash omits held the default (see lib/redis/encoding.ts). */
function storedOptions(attempts: number, h: Record<string, string>): StoredJobOptions {
  const backoff = decodeBackoff(h.backoff)
  const keepLogs = optionalNumber(h.keepLogs)
  return {
    attempts,
    ...(backoff === undefined ? {} : { backoff }),
    removeOnComplete: h.keep === undefined ? JOB_DEFAULTS.removeOnComplete : decodeKeep(h.keep),
    removeOnFail: h.keepFailed === undefined ? JOB_DEFAULTS.removeOnFail : decodeKeep(h.keepFailed),
    ...(keepLogs === undefined ? {} : { keepLogs }),
    stackTraceLimit: Number(h.stackTraceLimit ?? JOB_DEFAULTS.stackTraceLimit),
  }
}

/**
 * Times the job was taken: the start number in its run's token, its finish's receipt or a sweep's mark ("<worker>:<n>",
 * "=<worker>:<n>..."), else the `attemptsStarted` field a move that cleared the token wrote (lua/includes/starts.lua).
 */
function startsOf(token: string | undefined, field: string | undefined): number {
  const n = token === undefined ? undefined : /:(\d+)/.exec(token)?.[1]
  return Number(n ?? field ?? 0)
}

/** The `stacktrace` field (a JSON array a script wrote), or [] without one. */
function stacksOf(text: string | null | undefined): string[] {
  if (text == null) return []
  const list = parseJson(text)
  return Array.isArray(list) ? list.map(String) : []
}

/** A Job from HGETALL output, acting through `scope`. */
export function jobFromHash(id: string, hash: Record<string, string> | string[], scope?: JobScope): Job {
  return new Job(fieldsFromHash(id, hash), scope)
}

/**
 * Builds a Job just taken from takeJobs.lua's reply: an HMGET in its JOB_FIELDS order (name, data,
 * attempts, attemptsMade, attemptsStarted, createdOn, lastError, retried, progress, stacktrace; null for a field the
 * hash lacks), and what the take set (active, since `startedOn`, by `workerName`). Decoded without a
 * detour through an object, as a busy worker does this for every job.
 */
export function jobFromFields(id: string, f: (string | null)[], startedOn: string, workerName: string): JobFields {
  const job: JobFields = {
    id,
    name: f[0] ?? '',
    data: parseJson(f[1] ?? undefined),
    attempts: f[2] == null ? JOB_DEFAULTS.attempts : Number(f[2]),
    attemptsMade: f[3] == null ? 0 : Number(f[3]),
    attemptsStarted: f[4] == null ? 0 : Number(f[4]),
    state: 'active',
    createdOn: f[5] == null ? 0 : Number(f[5]),
    startedOn: Number(startedOn),
    workerName,
    stacktrace: stacksOf(f[9]),
  }
  if (f[6] != null) job.lastError = f[6]
  if (f[7] != null) job.retried = Number(f[7])
  if (f[8] != null) job.progress = parseJson(f[8])
  return job
}
