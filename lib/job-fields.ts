/**
 * The fields a Job is made from: what its hash holds, decoded (lib/redis/job-codec.ts), under EchoMQ's names;
 * lib/job.ts adds BullMQ's names for them.
 */
import type { StoredState } from './job.js'
import type { JobOpts } from './job-options.js'
import type { Untyped } from './listeners.js'
import type { ParentRef } from './redis/job-codec.js'

/** The fields a Job is made from (what a hash holds, decoded). */
export interface JobFields<Data = Untyped, Result = Untyped, Name extends string = string> {
  id: string
  name: Name
  data: Data
  /** Total starts allowed. */
  attempts: number
  /** Attempts used: runs that completed or failed (a stall uses none: stalledCounter). A run returned by a closing worker uses none. */
  attemptsMade: number
  /** Times a worker took the job (all runs, including those before a retry from `failed`). */
  attemptsStarted: number
  state: StoredState
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
  /** A delayed job's delay given after its add (ms: a backoff, changeDelay, moveToDelayed), while it is delayed. */
  lastDelay?: number
  /** The `name` of the worker that took the job last. */
  workerName?: string
  /** Times the job was sent back from `failed` or `completed` by retryJobs (job.retry). */
  retried?: number
  /** What the processor last reported with updateProgress (0 until then). */
  progress?: unknown
  /** 0 for none, else 1 (highest) .. 2^21 - 1. */
  priority?: number
  /** The job scheduler that made this job (BullMQ's name), when one did. */
  repeatJobKey?: string
  /** The stacks of its failed runs, oldest first, at most `opts.stackTraceLimit` (BullMQ's name; [] for none). */
  stacktrace?: string[]
  /** The options it runs under (BullMQ's `opts`; see job-opts.ts), on every job. */
  opts: JobOpts
  /** The id of its `deduplication` option, when it was added with one (BullMQ's name). */
  deduplicationId?: string
  /** Times the stalled sweep recovered it (BullMQ's name; the queue's maxStalledCount bounds it). */
  stalledCounter?: number
  /** A flow's child: its parent's job key, `<prefix>:{queue}:<id>` (BullMQ's name). */
  parentKey?: string
  /** A flow's child: its parent's id and queue (`queueKey`, the qualified name) and its failure policy (BullMQ's shape). */
  parent?: ParentRef
  /** A parent a child failed (failParentOnFailure): the reason it fails with when next taken, unrun (BullMQ's name). */
  deferredFailure?: string
}
