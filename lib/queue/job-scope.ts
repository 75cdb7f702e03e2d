/**
 * What the Jobs a Queue gives out are made with: their `opts` as add() stored them (without a read), and
 * the scope their own methods act through (progress and log lines, waitUntilFinished, the Queue).
 */
import { EchoMQError } from '../errors.js'
import type { JobFlows } from '../flows/job-flows.js'
import type { JobQueue, JobScope } from '../job.js'
import type { JobChanges } from '../job-changes.js'
import type { JobFinishes } from '../job-finishes.js'
import type { OptionField } from '../job-opts.js'
import { toJson } from '../json.js'
import { waitUntilFinished } from '../queue-events.js'
import * as commands from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import { type QueueKeys, qualifiedNameOf } from '../redis/keys.js'
import { readOutcome } from '../redis/queries.js'
import { describe, fail } from '../validate.js'

/**
 * Most bytes of JSON one progress report is stored with, through a Worker's job or a Queue's alike: each
 * report is written to the job's hash and to the events stream, so a processor reporting often must not
 * fill Redis with copies of a large value (BullMQ sets no bound).
 */
export const PROGRESS_MAX_BYTES = 64 * 1024

/** A progress report as stored (ERR_JOB_DATA: not JSON, or over PROGRESS_MAX_BYTES). */
export const progressJson = (progress: unknown): string =>
  toJson(progress, 'the progress', PROGRESS_MAX_BYTES, `the progress limit of ${PROGRESS_MAX_BYTES / 1024} KiB`)

/** A new job's option field as its hash would hold it (null: absent), for the opts of the Job add() returns. */
export function addedOption(j: commands.NewJob, field: OptionField): string | null {
  switch (field) {
    case 'backoff':
      return j.backoff === '' ? null : j.backoff
    case 'keep':
      return j.keep
    case 'keepFailed':
      return j.keepFailed
    case 'keepLogs':
      return j.keepLogs === undefined ? null : String(j.keepLogs)
    case 'priority':
      return j.priority > 0 ? String(j.priority) : null
    case 'stackTraceLimit':
      return String(j.stackTraceLimit)
    case 'delay':
      return j.delayMs > 0 ? String(j.delayMs) : null
    case 'lifo':
      return j.lifo ? '1' : null
  }
}

/**
 * What the jobs a Queue gives out act through: progress and log lines written for any job that exists (no
 * run owns it here, so nothing is fenced), waitUntilFinished, and the changes of lib/job-changes.ts.
 */
export function jobScope(
  client: RedisClient,
  keys: QueueKeys,
  queue: string,
  call: <T>(what: string, fn: () => Promise<T>) => Promise<T>,
  owner: JobQueue,
  progressed: (id: string, progress: unknown) => void,
  parts: { changes: JobChanges; flows: JobFlows; finishes: JobFinishes },
): JobScope {
  const { changes, flows, finishes } = parts
  const missing = (id: string, what: string) => new EchoMQError('ERR_JOB_MISSING', `job ${id} of queue ${queue} does not exist: ${what}`)
  return {
    async updateProgress(job, progress) {
      const json = progressJson(progress)
      const status = await call('update the progress of a job of queue', () => commands.updateProgress(client, keys, job.id, '', json))
      if (status === 'missing') throw missing(job.id, 'its progress was not recorded')
      progressed(job.id, progress)
    },
    async log(job, row) {
      if (typeof row !== 'string') fail('ERR_OPTIONS', `expected a log line to be a string, got: ${describe(row)}`)
      const { status, count } = await call('log a line of a job of queue', () => commands.addLog(client, keys, job.id, '', row))
      if (status === 'missing') throw missing(job.id, 'the line was not logged')
      return count
    },
    waitUntilFinished(job, events, ttl) {
      return waitUntilFinished(events, { id: job.id, name: job.name, queue }, ttl, () => readOutcome(client, keys, job.id))
    },
    queue: () => owner,
    changes: () => changes,
    flows: () => flows,
    finishes: () => finishes,
    qualifiedName: qualifiedNameOf(keys),
  }
}
