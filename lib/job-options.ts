/**
 * A job's options, as `add(name, data, options)` and `new Queue(name, { defaultJobOptions })` take them,
 * named as in BullMQ, every duration in ms. An option given to `add` wins over the queue's default, which
 * wins over EchoMQ's (defaults.json).
 *
 *   attempts          total runs allowed (1, BullMQ's default; 0 is read as 1, as BullMQ runs such a job once; a
 *                     crashed run is a stall, counted apart)
 *   jobId             the job's id, not an integer ("1", "2", ... per queue, as BullMQ's); an existing id
 *                     returns the stored job, changing nothing
 *   delay             ms before the job may run (0)
 *   backoff           the wait before each retry after an error: a number (fixed, ms) or
 *                     { type: 'fixed' | 'exponential', delay, maxDelay?, jitter? } (none: retry at once), or
 *                     { type: 'custom' (any name), delay? }: the worker's settings.backoffStrategy decides
 *   removeOnComplete  retention in `completed`: true (remove at once), false (keep all), a count, or
 *                     { count?, age?, limit? } (age in SECONDS, as BullMQ's) ({ count: 1000, age: 86400 }: a
 *                     day; BullMQ keeps every job by default, EchoMQ bounds the set: see
 *                     docs/migrating-from-bullmq-queue.md)
 *   removeOnFail      retention in `failed`, the same way ({ count: 10000, age: 604800 }: 7 days)
 *   keepLogs          log lines kept per job (job.log), the newest (all)
 *   priority          1 (highest) .. 2,097,151; 0 or none: no priority, and such jobs run first (0)
 *   lifo              to the front of the line rather than the back (false; ignored with a priority)
 *   stackTraceLimit   stack traces of failed runs kept in job.stacktrace, the newest (10; 0 for none)
 *   deduplication     { id, ttl?, extend?, replace?, reschedule?, keepLastIfActive? }: an add whose id is held returns the holder
 *                     (lib/deduplication.ts; add only)
 *
 * Validated here, before any Redis call; what reaches the scripts is encoded once, by the job hash's
 * codec (lib/redis/job-codec.ts), in the shapes lua/includes/backoff.lua and retention.lua read.
 */
import { type DeduplicationOptions, deduplicationOption } from './deduplication.js'
import defaults from './defaults.json' with { type: 'json' }
import { type FlowSettings, flowSettings } from './flows/options.js'
import { checkInteger, checkKnown, describe, fail, opt, RANGES } from './validate.js'

/** A retry's wait: a number (fixed, ms) or { type, delay, maxDelay?, jitter? } (job-options.ts validates it). */
export type Backoff = number | { type: BackoffType; delay?: number; maxDelay?: number; jitter?: number }
/** fixed, exponential, or a custom name the worker's settings.backoffStrategy handles (BullMQ's `type: 'custom'`). */
type BackoffType = 'fixed' | 'exponential' | (string & {})
/**
 * A finished set's retention, BullMQ's KeepJobs: true (remove at once), false (keep all), a count, or
 * { count?, age?, limit? } with `age` in seconds (BullMQ's unit; a fraction is kept to the ms). `limit` (BullMQ:
 * most jobs removed per finish) is accepted and not stored: EchoMQ trims in batches of its own (retention.ts).
 */
export type Retention = boolean | number | { count?: number; age?: number; limit?: number }

export interface JobOptions {
  attempts?: number
  jobId?: string
  delay?: number
  backoff?: Backoff
  removeOnComplete?: Retention
  removeOnFail?: Retention
  keepLogs?: number
  priority?: number
  lifo?: boolean
  stackTraceLimit?: number
  /** BullMQ's deduplication (lib/deduplication.ts); add and addBulk only, not defaultJobOptions. */
  deduplication?: DeduplicationOptions
  /** A flow's parent: { id, queue: the parent queue's qualifiedName } (lib/flows/options.ts); add only. */
  parent?: { id: string; queue: string }
  /** A child's failure policy, at most one (BullMQ's; lib/flows/options.ts). */
  failParentOnFailure?: boolean
  continueParentOnFailure?: boolean
  ignoreDependencyOnFailure?: boolean
  removeDependencyOnFailure?: boolean
}

/** Every job option but the id, with defaults applied. */
export interface JobSettings {
  attempts: number
  delay: number
  backoff: Backoff | undefined
  removeOnComplete: Retention
  removeOnFail: Retention
  keepLogs: number | undefined
  priority: number
  lifo: boolean
  stackTraceLimit: number
}

export const JOB_DEFAULTS: JobSettings = {
  attempts: defaults.attempts,
  delay: 0,
  backoff: undefined,
  removeOnComplete: defaults.removeOnComplete,
  removeOnFail: defaults.removeOnFail,
  keepLogs: undefined,
  priority: 0,
  lifo: false,
  stackTraceLimit: defaults.stackTraceLimit,
}

const JOB_OPTION_NAMES = [
  'attempts',
  'delay',
  'backoff',
  'removeOnComplete',
  'removeOnFail',
  'keepLogs',
  'priority',
  'lifo',
  'stackTraceLimit',
]
/** A flow's options (lib/flows/options.ts), named here: that module imports options.ts, which imports this one. */
const FLOW_OPTION_NAMES = [
  'parent',
  'failParentOnFailure',
  'continueParentOnFailure',
  'ignoreDependencyOnFailure',
  'removeDependencyOnFailure',
]
const ADD_OPTION_NAMES = ['jobId', ...JOB_OPTION_NAMES, 'deduplication', 'debounce', ...FLOW_OPTION_NAMES]
/** Most stack traces a job keeps: each is up to a few KiB, and a failed job keeps them all. */
const MAX_STACK_TRACE_LIMIT = 100
/** The lowest priority (BullMQ's limit): a score of priority * 2^32 + a counter stays an exact double. */
export const MAX_PRIORITY = 2 ** 21 - 1

/** The longest delay, backoff or retention age accepted: a year. */
const MAX_DELAY_MS = 365 * 24 * 3_600_000
/** A delay's range (add's `delay`, a backoff's, job.changeDelay's). */
export const DELAY = { min: 0, max: MAX_DELAY_MS, unit: 'ms' }
const COUNT = { min: 0, max: 1_000_000_000 }
/** A custom backoff's type name (BullMQ's `type: 'custom'`, or any name the worker's backoffStrategy reads). */
const BACKOFF_TYPE = /^[A-Za-z][\w-]{0,63}$/

function backoff(value: unknown): Backoff {
  if (typeof value === 'number') return checkInteger('backoff', value, DELAY)
  const o = checkKnown('backoff', value, ['type', 'delay', 'maxDelay', 'jitter'])
  if (typeof o.type !== 'string' || !BACKOFF_TYPE.test(o.type)) {
    fail('ERR_OPTIONS', `expected backoff.type to be fixed, exponential or a custom name ([A-Za-z][\\w-]{0,63}), got: ${describe(o.type)}`)
  }
  const builtIn = o.type === 'fixed' || o.type === 'exponential'
  const jitter = opt(o.jitter, 0, (v) => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 1)
      fail('ERR_OPTIONS', `expected backoff.jitter to be from 0 to 1, got: ${describe(v)}`)
    return v
  })
  return {
    type: o.type,
    // A custom type's wait comes from the worker's backoffStrategy: its delay is optional.
    delay: builtIn || o.delay !== undefined ? checkInteger('backoff.delay', o.delay, DELAY) : 0,
    ...(o.maxDelay === undefined ? {} : { maxDelay: checkInteger('backoff.maxDelay', o.maxDelay, DELAY) }),
    ...(jitter > 0 ? { jitter } : {}),
  }
}

/** The longest retention age accepted: a year, in seconds (BullMQ counts `age` in seconds). */
const MAX_AGE_S = 365 * 24 * 3_600

/** A retention age in seconds, 0 to a year; a fraction is kept to the millisecond (the scripts' unit). */
function ageSeconds(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_AGE_S) {
    fail('ERR_OPTIONS', `expected ${name} to be a number of seconds from 0 to ${MAX_AGE_S} (BullMQ's unit), got: ${describe(value)}`)
  }
  return Math.round(value * 1000) / 1000
}

/**
 * BullMQ's KeepJobs, validated: a job's removeOnComplete/removeOnFail and a worker's. The age stays in
 * seconds, as given: lua/includes/retention.lua's parseKeep makes it ms, the one conversion.
 */
export function retention(name: string) {
  return (value: unknown): Retention => {
    if (typeof value === 'boolean') return value
    if (typeof value === 'number') return checkInteger(name, value, COUNT)
    const o = checkKnown(name, value, ['count', 'age', 'limit'])
    if (o.limit !== undefined) checkInteger(`${name}.limit`, o.limit, COUNT)
    return {
      ...(o.count === undefined ? {} : { count: checkInteger(`${name}.count`, o.count, COUNT) }),
      ...(o.age === undefined ? {} : { age: ageSeconds(`${name}.age`, o.age) }),
    }
  }
}

/** Job options (for `add`, or a queue's `defaultJobOptions`) over `base`. */
export function jobSettings(what: string, options: unknown, base: JobSettings): JobSettings {
  const o = checkKnown(what, options, JOB_OPTION_NAMES)
  return {
    attempts: opt(o.attempts, base.attempts, (v) => Math.max(1, checkInteger('attempts', v, { ...RANGES.attempts, min: 0 }))),
    delay: opt(o.delay, base.delay, (v) => checkInteger('delay', v, DELAY)),
    backoff: opt(o.backoff, base.backoff, backoff),
    removeOnComplete: opt(o.removeOnComplete, base.removeOnComplete, retention('removeOnComplete')),
    removeOnFail: opt(o.removeOnFail, base.removeOnFail, retention('removeOnFail')),
    keepLogs: opt(o.keepLogs, base.keepLogs, (v) => checkInteger('keepLogs', v, COUNT)),
    priority: opt(o.priority, base.priority, (v) => checkInteger('priority', v, { min: 0, max: MAX_PRIORITY })),
    lifo: opt(o.lifo, base.lifo, (v) => {
      if (typeof v !== 'boolean') fail('ERR_OPTIONS', `expected lifo to be true or false, got: ${describe(v)}`)
      return v
    }),
    stackTraceLimit: opt(o.stackTraceLimit, base.stackTraceLimit, (v) =>
      checkInteger('stackTraceLimit', v, { min: 0, max: MAX_STACK_TRACE_LIMIT }),
    ),
  }
}

/** `add`'s options over the queue's defaults; the job id, if any, as given (options.ts validates ids). */
export function addSettings(
  options: unknown,
  base: JobSettings,
  what = 'add',
): JobSettings & { jobId: unknown; deduplication?: DeduplicationOptions; flow: FlowSettings } {
  if (options === undefined) return { ...base, jobId: undefined, flow: {} }
  const o = checkKnown(what, options, ADD_OPTION_NAMES)
  const { jobId, deduplication, debounce } = o
  const rest = Object.fromEntries(Object.entries(o).filter(([k]) => JOB_OPTION_NAMES.includes(k)))
  const dedup = deduplicationOption(deduplication, debounce)
  const flow = flowSettings(o)
  if (dedup && flow.parent) fail('ERR_OPTIONS', 'Deduplication and parent options cannot be used together')
  return { ...jobSettings(what, rest, base), jobId, ...(dedup ? { deduplication: dedup } : {}), flow }
}

/** The options a stored job was added with (its hash's fields), BullMQ's `job.opts`; `delay` and `jobId` are not kept. */
interface StoredJobOptions {
  attempts: number
  backoff?: Backoff
  removeOnComplete: Retention
  removeOnFail: Retention
  keepLogs?: number
  stackTraceLimit: number
}

/** `job.opts`, BullMQ's: the options a job runs under, read back from its hash (lib/redis/job-codec.ts jobOpts). */
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
  /** A flow's child: its parent, { id, queue: the parent queue's qualified name } (BullMQ's). */
  parent?: { id: string; queue: string }
  /** A flow's child: its failure policy, when it has one (BullMQ's options). */
  failParentOnFailure?: boolean
  continueParentOnFailure?: boolean
  ignoreDependencyOnFailure?: boolean
  removeDependencyOnFailure?: boolean
}
