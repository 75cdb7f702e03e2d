/**
 * What a Job's methods act through: the Queue or Worker that gave it out (lib/queue/job-scope.ts,
 * lib/worker/job-scope.ts implement it over their Redis boundary).
 */
import type { JobFlows } from './flows/job-flows.js'
import type { BullJobState, Job } from './job.js'
import type { JobChanges } from './job-changes.js'
import type { JobFinishes } from './job-finishes.js'

/** The Queue operations a Job's own methods use (job.remove() is queue.remove(job.id), and so on). */
export interface JobQueue {
  remove(id: string, opts?: { removeChildren?: boolean }): Promise<0 | 1>
  retryJobs(options: { ids: string[]; state?: 'failed' | 'completed'; resetAttemptsMade?: boolean }): Promise<string[]>
  promoteJob(id: string): Promise<void>
  getJobState(id: string): Promise<BullJobState>
}

/** What a Job's methods act through: the Queue or Worker that gave it out (their Redis boundary). */
export interface JobScope {
  updateProgress(job: Job, progress: unknown, token: string | undefined): Promise<void>
  log(job: Job, row: string, token: string | undefined): Promise<number>
  waitUntilFinished(job: Job, queueEvents: unknown, ttl: number | undefined): Promise<unknown>
  queue(): JobQueue
  /** updateData, changePriority, moveToDelayed, extendLock, clearLogs (lib/job-changes.ts). */
  changes(): JobChanges
  /** A parent's children and moveToWaitingChildren (lib/flows/job-flows.ts). */
  flows(): JobFlows
  /** moveToCompleted and moveToFailed (lib/job-finishes.ts). */
  finishes(): JobFinishes
  /** The job's queue's qualified name, `<prefix>:{queue}` (BullMQ's queueQualifiedName). */
  readonly qualifiedName: string
}
