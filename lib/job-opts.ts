/**
 * `job.opts`, BullMQ's: the options a job runs under, on every Job (the one add() resolves to, getJob's
 * and getJobs', the one a processor is given), read back from what its hash stores. A job's hash holds an
 * option only when it differs from the default (lib/redis/encoding.ts), so an absent field reads as the
 * default here: the options cost no byte, and `opts` still says what applies. Two things are derived
 * rather than stored: `jobId` (the id, when the producer named the job: EchoMQ's own ids are integers and
 * a scheduler's runs are repeat:<id>:<ms>) and `timestamp` (createdOn).
 *
 * Differences from BullMQ: `attempts` is the total in effect (BullMQ keeps what was given, 0 when none),
 * and `removeOnComplete`/`removeOnFail` say the retention in effect, EchoMQ's default included.
 */
import { decodeBackoff, decodeKeep, JOB_DEFAULTS, type StoredJobOptions } from './job-options.js'

export interface JobOpts extends StoredJobOptions {
  /** ms the job waited before its first run, when it was added with a delay. */
  delay?: number
  /** 1 (highest) .. 2^21 - 1, when it was added with a priority. */
  priority?: number
  /** When it was added to the front of `wait`. */
  lifo?: boolean
  /** The id the producer gave (absent for the ids EchoMQ gives and a scheduler's runs). */
  jobId?: string
  /** When it was added (ms, Redis's clock): BullMQ's opts.timestamp. */
  timestamp: number
}

/** The option fields of a job hash, in the order takeJobs.lua's JOB_FIELDS lists them after `stacktrace`. */
export const OPTION_FIELDS = ['backoff', 'keep', 'keepFailed', 'keepLogs', 'priority', 'stackTraceLimit', 'delay', 'lifo'] as const
export type OptionField = (typeof OPTION_FIELDS)[number]

const ITERATION = /^repeat:[^:]+:\d+$/

/** Whether `id` was given by the producer: not an id EchoMQ numbered, nor a scheduler's run. */
export function isCustomId(id: string): boolean {
  return `${Number.parseInt(id, 10)}` !== id && !ITERATION.test(id)
}

const num = (v: string | null | undefined) => (v == null || v === '' ? undefined : Number(v))

/** job.opts from a job's id, createdOn, attempts and its option fields (null or undefined: absent). */
export function jobOpts(id: string, createdOn: number, attempts: number, field: (name: OptionField) => string | null | undefined): JobOpts {
  const backoff = decodeBackoff(field('backoff') ?? undefined)
  const keep = field('keep')
  const keepFailed = field('keepFailed')
  const keepLogs = num(field('keepLogs'))
  const priority = num(field('priority'))
  const delay = num(field('delay'))
  return {
    attempts,
    ...(backoff === undefined ? {} : { backoff }),
    ...(delay === undefined ? {} : { delay }),
    ...(priority === undefined ? {} : { priority }),
    ...(field('lifo') === '1' ? { lifo: true } : {}),
    ...(isCustomId(id) ? { jobId: id } : {}),
    timestamp: createdOn,
    removeOnComplete: keep == null ? JOB_DEFAULTS.removeOnComplete : decodeKeep(keep),
    removeOnFail: keepFailed == null ? JOB_DEFAULTS.removeOnFail : decodeKeep(keepFailed),
    ...(keepLogs === undefined ? {} : { keepLogs }),
    stackTraceLimit: num(field('stackTraceLimit')) ?? JOB_DEFAULTS.stackTraceLimit,
  }
}
