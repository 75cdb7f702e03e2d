/**
 * A job as stored in its hash (read back by lib/redis/job-codec.ts): data, under EchoMQ's names and BullMQ's
 * (`createdOn` is also `timestamp`, `startedOn` also `processedOn`, `returnValue` also `returnvalue`), with
 * methods that act through the Queue or Worker it came from (its scope). The scope is not an enumerable
 * property, so a Job compares and copies as its data, and serialises with BullMQ's names added (toJSON).
 */

import { EchoMQError } from './errors.js'
import type { Dependencies, DependenciesOptions } from './flows/job-flows.js'
import { retryJob } from './job-changes.js'
import type { JobFields } from './job-fields.js'
import { jobFromJSON, type NextJobData } from './job-finishes.js'
import type { JobOptions, JobOpts } from './job-options.js'
import type { JobScope } from './job-scope.js'
import type { Untyped } from './listeners.js'
import { fieldsFromHash, type ParentRef } from './redis/job-codec.js'

/** Where a job is: `prioritized` is waiting with a priority (BullMQ's name). */
export type JobState = 'wait' | 'prioritized' | 'delayed' | 'active' | 'completed' | 'failed'

/** A job's state field: a JobState, or `waiting-children` for a flow's parent waiting for its children (BullMQ's name). */
export type StoredState = JobState | 'waiting-children'

export const JOB_STATES: readonly JobState[] = ['wait', 'prioritized', 'delayed', 'active', 'completed', 'failed']

export type { QueueCounts, SweepCounts } from './job-counts.js'
export type { JobFields } from './job-fields.js'
export type { JobQueue, JobScope } from './job-scope.js'

/** A job's state under BullMQ's names (`waiting` for `wait`; `unknown` for a job that does not exist). */
export type BullJobState = 'waiting' | 'prioritized' | 'delayed' | 'active' | 'completed' | 'failed' | 'waiting-children' | 'unknown'

/** What a Job's JSON adds to its fields: BullMQ's names for those EchoMQ keeps under its own. */
interface BullMQNames<Result> {
  queueQualifiedName?: string
  returnvalue: Result | null
  timestamp: number
  processedOn: number | undefined
  delay: number
}

/**
 * A job, with BullMQ's type parameters: the data, the processor's result and the job names (`any`,
 * `any`, `string` when not given, as in BullMQ).
 */
export class Job<Data = Untyped, Result = Untyped, Name extends string = string> implements JobFields<Data, Result, Name> {
  declare id: string
  declare name: Name
  declare data: Data
  declare attempts: number
  declare attemptsMade: number
  declare attemptsStarted: number
  declare state: StoredState
  declare failedReason?: string
  declare lastError?: string
  declare returnValue?: Result
  declare createdOn: number
  declare startedOn?: number
  declare finishedOn?: number
  declare dueAt?: number
  declare lastDelay?: number
  declare workerName?: string
  declare retried?: number
  declare repeatJobKey?: string
  declare opts: JobOpts
  declare deduplicationId?: string
  declare parentKey?: string
  declare parent?: ParentRef
  declare deferredFailure?: string
  progress: unknown = 0
  stalledCounter = 0
  /** 0 for none (BullMQ's default too). */
  priority = 0
  stacktrace: string[] = []
  readonly #scope: JobScope | undefined
  /** The run's token, for the job a processor is given: its updateProgress and log are fenced by it. */
  readonly #token: string | undefined
  /** The token worker.getNextJob(token) was given (the run's is `<token>:<start number>`). */
  readonly #given: string | undefined
  /** `delay` once promote(), moveToDelayed(), changeDelay() or a retry's backoff changed it on this object. */
  #delay: number | undefined

  constructor(fields: JobFields<Data, Result, Name>, scope?: JobScope, token?: string, given?: string) {
    Object.assign(this, fields)
    this.#scope = scope
    this.#token = token
    this.#given = given
  }

  /** The run's token (BullMQ's job.token): a processor's job's, or getNextJob's; undefined elsewhere. */
  get token(): string | undefined {
    return this.#given ?? this.#token
  }

  /** The qualified name of the job's queue, `<prefix>:{queue}` (BullMQ's; a child's `opts.parent.queue` names its parent's). */
  get queueQualifiedName(): string {
    return this.scope().qualifiedName
  }

  /** The name of the job's queue (BullMQ's queueName). */
  get queueName(): string {
    return /\{([^}]*)\}$/.exec(this.queueQualifiedName)?.[1] ?? ''
  }

  /** A parent's completed children: their job keys -> return values (BullMQ's getChildrenValues). */
  getChildrenValues<T = Untyped>(): Promise<Record<string, T>> {
    return this.scope().flows().getChildrenValues(this) as Promise<Record<string, T>>
  }

  /** Failures of children that were ignored (ignoreDependencyOnFailure, continueParentOnFailure): job key -> reason. */
  getIgnoredChildrenFailures(): Promise<Record<string, string>> {
    return this.scope().flows().getIgnoredChildrenFailures(this)
  }

  /** getIgnoredChildrenFailures' older name (BullMQ's). */
  getFailedChildrenValues(): Promise<Record<string, string>> {
    return this.getIgnoredChildrenFailures()
  }

  /** A parent's children by kind (BullMQ's): processed, unprocessed, ignored, failed; with options, pages (docs/flows.md). */
  getDependencies(options?: DependenciesOptions): Promise<Dependencies> {
    return this.scope().flows().getDependencies(this, options)
  }

  /** How many children of each kind (those named with a truthy value; none: all four). */
  getDependenciesCount(options?: Partial<Record<'processed' | 'unprocessed' | 'ignored' | 'failed', boolean>>) {
    return this.scope().flows().getDependenciesCount(this, options)
  }

  /**
   * Parks the job, in flight, in `waiting-children` while it has pending children (or `child`): true when
   * moved (then throw `new WaitingChildrenError()`), false when none is pending. Fenced by `token` (the run's
   * by default): ERR_LOCK_LOST, ERR_JOB_STATE (not in flight); an UnrecoverableError when a failParentOnFailure
   * child failed it (BullMQ's: thrown on, the job fails at once).
   */
  async moveToWaitingChildren(token?: string, options?: { child?: { id: string; queue: string } }): Promise<boolean> {
    const moved = await this.scope()
      .flows()
      .moveToWaitingChildren(this, this.runToken(token) ?? '', options)
    if (moved) this.state = 'waiting-children'
    return moved
  }

  /** Takes this child from its parent (BullMQ's): true when the parent waited for it; ERR_JOB_MISSING (docs/flows.md). */
  async removeChildDependency(): Promise<boolean> {
    const removed = await this.scope().flows().removeChildDependency(this)
    if (removed) {
      delete this.parent
      delete this.parentKey
    }
    return removed
  }

  /** Removes this parent's children not yet started (and theirs), as BullMQ's; running and finished ones stay. */
  removeUnprocessedChildren(): Promise<void> {
    return this.scope().flows().removeUnprocessedChildren(this)
  }

  /** BullMQ's name for createdOn. */
  get timestamp(): number {
    return this.createdOn
  }

  /** BullMQ's name for startedOn: when the last run started. */
  get processedOn(): number | undefined {
    return this.startedOn
  }

  /** BullMQ's name for workerName: the worker that took the job last. */
  get processedBy(): string | undefined {
    return this.workerName
  }

  /**
   * BullMQ's job.delay (ms): while the job waits out a delay (`delayed`, or a flow's parent in
   * `waiting-children` that was added with one and has not run), that delay: the one it was added with, or
   * its later one (a retry's backoff, changeDelay(), moveToDelayed(): `lastDelay`); in any other state 0, as
   * BullMQ sets its field to 0 when it promotes a job (its options keep the delay: `opts.delay`). When a
   * delayed job is due is `dueAt`. Writable, as BullMQ's.
   */
  get delay(): number {
    if (this.#delay !== undefined) return this.#delay
    if (this.state !== 'delayed' && (this.state !== 'waiting-children' || this.startedOn !== undefined)) return 0
    return this.lastDelay ?? this.opts.delay ?? 0
  }

  set delay(ms: number) {
    this.#delay = ms
  }

  /** BullMQ's name for returnValue; null (BullMQ's value) while the job has none: it has not completed. */
  get returnvalue(): Result | null {
    return this.returnValue === undefined ? null : this.returnValue
  }

  /** Settable, as BullMQ's field is (JSON.stringify(job) shows it: toJSON). */
  set returnvalue(value: Result) {
    this.returnValue = value
  }

  /**
   * What JSON.stringify(job) shows: the job's fields and, as BullMQ's toJSON shows them, BullMQ's names for
   * those EchoMQ keeps under its own (returnvalue, timestamp, processedOn, delay) and its queue's qualified
   * name (a string: never the queue object, nor the token).
   */
  toJSON(): JobFields<Data, Result, Name> & BullMQNames<Result> {
    const queueQualifiedName = this.#scope?.qualifiedName
    const names = { returnvalue: this.returnvalue, timestamp: this.timestamp, processedOn: this.processedOn, delay: this.delay }
    return { ...this, ...(queueQualifiedName === undefined ? {} : { queueQualifiedName }), ...names }
  }

  /** Records the job's progress (a number or JSON object), emits `progress`; a run's job: while the run owns it. */
  async updateProgress(progress: number | object): Promise<void> {
    await this.scope().updateProgress(this, progress, this.#token)
    this.progress = progress
  }

  /** Appends a line to the job's log; resolves to the number of lines kept (see the `keepLogs` option). */
  log(row: string): Promise<number> {
    return this.scope().log(this, row, this.#token)
  }

  /** Clears the job's log, or keeps its newest `keepLogs` lines (BullMQ's clearLogs; not fenced). */
  clearLogs(keepLogs?: number): Promise<void> {
    return this.scope().changes().clearLogs(this, keepLogs)
  }

  /** The job's return value once it completes; rejects with its failure reason once it fails for good, or ERR_TIMEOUT. */
  waitUntilFinished(queueEvents: unknown, ttl?: number): Promise<Result> {
    return this.scope().waitUntilFinished(this, queueEvents, ttl) as Promise<Result>
  }

  /** Replaces the job's data (BullMQ's updateData), checked as add's; not fenced by a run (docs/changing-jobs.md). */
  async updateData(data: Data): Promise<void> {
    await this.scope().changes().updateData(this, data)
    this.data = data
  }

  /** A new priority (0: none; BullMQ's changePriority): a waiting job is filed again at once, behind its equals. */
  async changePriority(options: { priority?: number; lifo?: boolean }): Promise<void> {
    this.priority = await this.scope().changes().changePriority(this, options)
  }

  /**
   * The job, in flight, to `delayed` until `timestamp` (ms since the epoch), no attempt used; then throw
   * `new DelayedError()`. Fenced by `token` (the run's by default): ERR_LOCK_LOST, ERR_JOB_STATE.
   */
  async moveToDelayed(timestamp: number, token?: string): Promise<void> {
    const due = await this.scope()
      .changes()
      .moveToDelayed(this, timestamp, this.runToken(token) ?? '')
    this.state = 'delayed'
    this.dueAt = due
    this.#delay = Math.max(0, timestamp - Date.now())
  }

  /**
   * Reschedules a delayed job to run `delay` ms from now, whatever it was due at (BullMQ's changeDelay).
   * ERR_JOB_STATE when it is not delayed, ERR_JOB_MISSING, ERR_OPTIONS; nothing changed then.
   */
  async changeDelay(delay: number): Promise<void> {
    this.dueAt = await this.scope().changes().changeDelay(this, delay)
    this.delay = delay
  }

  /** Extends the run's lease to `duration` ms from now (BullMQ's extendLock): 1, or 0 when `token` does not hold it. */
  extendLock(token: string, duration: number): Promise<number> {
    return this.scope()
      .changes()
      .extendLock(this, this.runToken(token) as string, duration)
  }

  /**
   * Completes the job, in flight, with `returnValue` (BullMQ's, for a job taken with worker.getNextJob(token));
   * fetchNext takes the next job too (lib/job-finishes.ts). Fenced by `token`: ERR_LOCK_LOST, ERR_JOB_STATE.
   */
  moveToCompleted(returnValue: Result, token?: string, fetchNext = true): Promise<NextJobData> {
    return this.scope().finishes().complete(this, returnValue, this.finishToken(token), fetchNext)
  }

  /** Fails the job, in flight, as a processor's throw of `err` does (an attempt used; BullMQ's moveToFailed). */
  moveToFailed(err: unknown, token?: string, fetchNext = false): Promise<NextJobData> {
    return this.scope().finishes().fail(this, err, this.finishToken(token), fetchNext)
  }

  /** The job, in flight, back to the front of the line, no attempt used (BullMQ's moveToWait): the rate limit's hold, ms. */
  moveToWait(token?: string): Promise<number> {
    return this.scope().finishes().release(this, this.finishToken(token))
  }

  /** BullMQ finishes with the token "0" unchecked: here it stands for the run's, which this Job holds (else none). */
  private finishToken(token: unknown): string | undefined {
    return token === '0' ? this.#token : this.runToken(token)
  }

  /**
   * The token a change is fenced by: the one given (a processor's second argument), else the run's. An
   * AbortSignal in the token's place (a processor written for EchoMQ's former `(job, signal)`) stands for
   * the run's token too, as getNextJob's token does (the run's is made of it). A Job not taken here (read,
   * or Job.fromJSON of a fetched next job) given getNextJob's token: the run of its current start.
   */
  private runToken(token: unknown): string | undefined {
    if (token === undefined || token instanceof AbortSignal || token === this.#given) return this.#token
    if (this.#token === undefined && typeof token === 'string' && token !== '' && !token.endsWith(`:${this.attemptsStarted}`))
      return `${token}:${this.attemptsStarted}`
    return token as string
  }

  /** Releases the job's deduplication id if it still holds it (BullMQ's removeDeduplicationKey): true when it did. */
  async removeDeduplicationKey(): Promise<boolean> {
    if (this.deduplicationId === undefined) return false
    return this.scope().changes().removeDeduplicationKey(this, this.deduplicationId)
  }

  /** Removes the job; ERR_JOB_ACTIVE while it runs (BullMQ throws too: a running job is ended by its worker). */
  async remove(opts?: { removeChildren?: boolean }): Promise<void> {
    if ((await this.scope().queue().remove(this.id, opts)) === 0)
      throw new EchoMQError(
        'ERR_JOB_ACTIVE',
        `job ${this.id} could not be removed: it or a job of its tree is in flight (BullMQ: locked by a worker)`,
      )
  }

  /** The job `id` of `queue`, undefined when there is none (BullMQ's Job.fromId: queue.getJob). */
  static fromId<D = Untyped, R = Untyped, N extends string = string>(
    queue: { getJob(id: string): Promise<Job<Untyped, Untyped, Untyped> | undefined> },
    id: string,
  ): Promise<Job<D, R, N> | undefined> {
    return queue.getJob(id) as Promise<Job<D, R, N> | undefined>
  }

  /** A Job of `json` (a job's JSON: moveToCompleted's fetched next job) acting through `owner` (BullMQ's Job.fromJSON). */
  static fromJSON(owner: unknown, json: unknown, jobId?: string): Job {
    return jobFromJSON(owner, json, jobId)
  }

  /** Adds a job to `queue` and resolves to it (BullMQ's Job.create: queue.add, its options validated the same). */
  static create<D = Untyped, R = Untyped, N extends string = string>(
    queue: { add(name: N, data: D, opts?: JobOptions): Promise<Job<Untyped, Untyped, Untyped>> },
    name: N,
    data: D,
    opts?: JobOptions,
  ): Promise<Job<D, R, N>> {
    return queue.add(name, data, opts) as Promise<Job<D, R, N>>
  }

  /** A failed (or completed) job back to `wait`, attemptsMade kept unless `resetAttemptsMade`, as BullMQ's (job-changes.ts retryJob). */
  retry(state: 'failed' | 'completed' = 'failed', opts: { resetAttemptsMade?: boolean; resetAttemptsStarted?: boolean } = {}) {
    return retryJob(this, this.scope().queue(), state, opts)
  }

  /** Moves a delayed job to `wait` now (queue.promoteJob). */
  async promote(): Promise<void> {
    await this.scope().queue().promoteJob(this.id)
    this.state = 'wait'
    this.#delay = 0
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

  async isWaitingChildren(): Promise<boolean> {
    return (await this.getState()) === 'waiting-children'
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

/** A Job from HGETALL output, acting through `scope`. */
export function jobFromHash(id: string, hash: Record<string, string> | string[], scope?: JobScope): Job {
  return new Job(fieldsFromHash(id, hash), scope)
}

export { fieldsFromHash } from './redis/job-codec.js'
