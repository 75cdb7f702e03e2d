/**
 * The events of Queue, Worker and QueueEvents as BullMQ 6.7 types them (QueueListener, WorkerListener,
 * QueueEventsListener), so `on('completed', (job, result) => ...)` gets typed arguments. The names are
 * BullMQ's; an event EchoMQ never emits is still listed (a BullMQ program type-checks) and says so.
 */
import type { Job } from './job.js'

/**
 * What a type parameter left out means: `any`, as in BullMQ (an untyped Worker's job.data is any there,
 * and a BullMQ program relies on it).
 */
// biome-ignore lint/suspicious/noExplicitAny: BullMQ's defaults are any; EchoMQ's must be for its programs to compile unchanged
export type Untyped = any

/** What job.updateProgress takes (BullMQ's JobProgress). */
export type JobProgress = string | boolean | number | object

/** A Queue's own events: what this instance's own calls did (not other processes': see QueueEvents). */
export interface QueueListener<JobBase = Job> {
  /** clean() removed these jobs of `type`. */
  cleaned: (jobs: string[], type: string) => void
  /** The connection failed (emitted only while someone listens). */
  error: (err: Error) => void
  paused: () => void
  /** updateJobProgress (or job.updateProgress on a job this Queue gave out). */
  progress: (jobId: string, progress: JobProgress) => void
  /** remove() removed the job (resolved to 1). */
  removed: (jobId: string) => void
  resumed: () => void
  /** add() or addBulk() added the job. */
  waiting: (job: JobBase) => void
}

export interface WorkerListener<DataType = Untyped, ResultType = Untyped, NameType extends string = string> {
  active: (job: Job<DataType, ResultType, NameType>, prev: string) => void
  closed: () => void
  closing: (msg: string) => void
  completed: (job: Job<DataType, ResultType, NameType>, result: ResultType, prev: string) => void
  drained: () => void
  error: (failedReason: Error) => void
  /** Always with its job (BullMQ types it `Job | undefined`: a listener written for either compiles). */
  failed: (job: Job<DataType, ResultType, NameType>, error: Error, prev: string) => void
  paused: () => void
  progress: (job: Job<DataType, ResultType, NameType>, progress: JobProgress) => void
  ready: () => void
  resumed: () => void
  /** A job this worker's stalled sweep recovered (stalledInterval; none with skipStalledCheck), prev `active`. */
  stalled: (jobId: string, prev: string) => void
  /** EchoMQ's: the run lost its lease (its signal is aborted; it cannot complete the job). */
  lockLost: (job: Job<DataType, ResultType, NameType>, err: Error) => void
  /** Never emitted by a Worker (EchoMQ reports a lost lease with `lockLost`). */
  lockRenewalFailed: (jobIds: string[]) => void
  /** Never emitted by a Worker. */
  locksRenewed: (data: { count: number; jobIds: string[] }) => void
}

export interface QueueEventsListener<ReturnType = Untyped> {
  active: (args: { jobId: string; prev?: string }, id: string) => void
  added: (args: { jobId: string; name: string }, id: string) => void
  cleaned: (args: { count: string }, id: string) => void
  completed: (args: { jobId: string; returnvalue: ReturnType; prev?: string }, id: string) => void
  /** An add with a deduplication id another job holds (see docs/changing-jobs.md). */
  deduplicated: (args: { jobId: string; deduplicationId: string; deduplicatedJobId: string }, id: string) => void
  delayed: (args: { jobId: string; delay: number }, id: string) => void
  drained: (id: string) => void
  duplicated: (args: { jobId: string }, id: string) => void
  error: (args: Error) => void
  failed: (args: { jobId: string; failedReason: string; prev?: string }, id: string) => void
  paused: (args: object, id: string) => void
  progress: (args: { jobId: string; data: JobProgress }, id: string) => void
  removed: (args: { jobId: string; prev: string }, id: string) => void
  resumed: (args: object, id: string) => void
  'retries-exhausted': (args: { jobId: string; attemptsMade: string }, id: string) => void
  stalled: (args: { jobId: string }, id: string) => void
  waiting: (args: { jobId: string; prev?: string }, id: string) => void
  /** Never emitted (EchoMQ has no flows). */
  'waiting-children': (args: { jobId: string }, id: string) => void
}

/** The arguments of listener `L` (never for what is not a function). */
export type ListenerArgs<L> = L extends (...args: infer A) => void ? A : never
