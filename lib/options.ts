/**
 * Every option EchoMQ accepts is validated here, with its default stated once (in defaults.json, which
 * serverless.yml and the command's help read too) and its limits stated once (RANGES, which the reaper's
 * configuration uses for the same settings). Durations are integers in milliseconds. Unknown option
 * names are rejected with the closest known name, so a typo never silently falls back to a default.
 * Validation happens before any Redis call.
 */
import { hostname } from 'node:os'
import { type Clock, systemClock } from './clock.js'
import defaults from './defaults.json' with { type: 'json' }
import { EchoMQError } from './errors.js'
import { JOB_DEFAULTS, type JobSettings, jobSettings, type Retention, retention } from './job-options.js'
import { QUEUE_KEY_NAMES } from './redis/keys.js'
import { checkInteger, checkKnown, describe, fail, LONE_SURROGATE, MAX_DURATION_MS, opt, RANGES } from './validate.js'

export { type Clock, systemClock } from './clock.js'
export { RANGES, type Range } from './validate.js'

export const DEFAULTS = defaults
export const PREFIX_DEFAULT = defaults.prefix
export const ATTEMPTS_DEFAULT = defaults.attempts
export const MAX_DATA_BYTES_DEFAULT = defaults.maxDataBytes
export const CONCURRENCY_DEFAULT = defaults.concurrency
export const LOCK_DURATION_MS_DEFAULT = defaults.lockDurationMs
/** Heartbeat default is half the lease, so one missed tick never loses it. */
export const HEARTBEAT_FRACTION_DEFAULT = 0.5
/** close() waits for running jobs with no bound unless closeTimeout is given (BullMQ's close()). */
export const CLOSE_TIMEOUT_MS_DEFAULT = undefined
export const MAX_STALLED_COUNT_DEFAULT = defaults.maxStalledCount
export const STALLED_INTERVAL_MS_DEFAULT = defaults.stalledIntervalMs
/** The longest a rate-limited worker sleeps before asking Redis again (ms): BullMQ's maximumRateLimitDelay. */
export const MAXIMUM_RATE_LIMIT_DELAY_MS_DEFAULT = 30_000
/** How long worker.getNextJob({ block: true }) waits for a job (s): BullMQ's drainDelay. */
export const DRAIN_DELAY_S_DEFAULT = defaults.drainDelayS
/**
 * close() returns within closeTimeout plus this: the time it gives the calls that return running jobs to
 * `wait`. Calls still unanswered then (a stalled link) finish in the background.
 */
export const CLOSE_MARGIN_MS = 250
export const SWEEP_GRACE_MS_DEFAULT = defaults.sweepGraceMs
export const SWEEP_LIMIT_DEFAULT = defaults.sweepLimit
export const SWEEP_AUDIT_DEFAULT = defaults.sweepAudit

const QUEUE_NAME = /^[A-Za-z0-9._:-]{1,128}$/
/** The longest job id (UTF-16 code units): an e-mail address (254) with a short prefix fits. */
export const MAX_JOB_ID_LENGTH = 256
/** Control characters (C0, DEL, C1): a job id is one line of text, printed in logs and pages as it is. */
const CONTROL = /\p{Cc}/u
/**
 * A job scheduler's iteration: repeat:<scheduler id>:<due ms> (made by EchoMQ, never given to add). A
 * scheduler id holds no ':', so an iteration id has exactly three parts, the one form BullMQ 6.7 allows ':' in.
 */
const ITERATION_ID = /^repeat:[^:]{1,256}:\d{1,16}$/
const PREFIX = /^[A-Za-z0-9._:-]{1,64}$/
/** Ids that would make the job's key collide with one of the queue's own keys. */
const RESERVED_JOB_IDS: ReadonlySet<string> = new Set(QUEUE_KEY_NAMES)

export const isQueueName = (name: string): boolean => QUEUE_NAME.test(name)

export function validateQueueName(name: unknown): string {
  if (typeof name !== 'string' || !QUEUE_NAME.test(name)) {
    fail('ERR_QUEUE_NAME', `expected a queue name of 1-128 characters from [A-Za-z0-9._:-], got: ${describe(name)}`)
  }
  return name
}

/**
 * A job id to read or act on: one given to add, one EchoMQ gave, or a job scheduler's run (repeat:<id>:<ms>,
 * longer than MAX_JOB_ID_LENGTH when its scheduler's id is near it).
 */
export function validateJobId(id: unknown): string {
  if (typeof id === 'string' && (GIVEN_ID.test(id) || (ITERATION_ID.test(id) && !CONTROL.test(id) && !LONE_SURROGATE.test(id)))) return id
  return validateNewJobId(id)
}

/** The ids EchoMQ gives jobs added without one (queue/job-ids.ts). */
const GIVEN_ID = /^[1-9]\d{0,15}$/

/** Text of 1-MAX_JOB_ID_LENGTH characters, well formed (no lone surrogate), without control characters. */
function wellFormedId(id: string): boolean {
  return id.length > 0 && id.length <= MAX_JOB_ID_LENGTH && !CONTROL.test(id) && !LONE_SURROGATE.test(id)
}

function badId(message: string, hint?: string): never {
  throw new EchoMQError('ERR_JOB_ID', message, hint === undefined ? {} : { hint })
}

/**
 * A job id for add, by BullMQ 6.7's rules (Job.validateOptions, Queue.addJob): any text but an integer
 * (`${parseInt(id, 10)}` === id: those are the ids EchoMQ gives) and with ':' only in an id of exactly
 * three parts (`acme:invoice:42`); '/', '@', spaces and any letter are fine. EchoMQ adds a length
 * (MAX_JOB_ID_LENGTH), no control characters, and three refusals that keep keys apart (lib/redis/keys.ts):
 * not one of the queue's own key names, no first part that is one ('schedulers:a:b' is a scheduler's
 * hash), and not `repeat:<id>:<digits>` (a job scheduler's run). With ':' only in threes, a job's hash
 * (`<id>`: 0 or 2 colons) never meets another job's lease or log (`<id>:lock`, `<id>:logs`: 1 or 3).
 * The key's hash tag stays the queue's: it is the first `{...}` of the key, before the id.
 */
export function validateNewJobId(id: unknown): string {
  if (typeof id !== 'string' || !wellFormedId(id)) {
    badId(
      `expected a job id of 1-${MAX_JOB_ID_LENGTH} characters of text without control characters, got: ${describe(id)}`,
      "BullMQ's rules apply (no integer; ':' only in ids of three parts); EchoMQ adds the length",
    )
  }
  const named = describe(id)
  if (`${Number.parseInt(id, 10)}` === id) {
    badId(
      `a custom jobId cannot be an integer, got: ${named}`,
      'EchoMQ numbers the jobs added without a jobId "1", "2", ... (as BullMQ does); use a prefix, such as "order-42"',
    )
  }
  const parts = id.split(':')
  if (parts.length !== 1 && parts.length !== 3) {
    badId(
      `job id ${named} has ${parts.length - 1} ':': a custom jobId holds ':' only as three parts, such as "acme:invoice:42" (BullMQ 6.7's rule)`,
    )
  }
  if (parts[0] === '0') badId(`job id ${named} starts with '0:' (BullMQ 6.7's Queue.add refuses it too)`)
  if (RESERVED_JOB_IDS.has(parts[0] as string)) {
    badId(`job id ${named} is reserved: it would collide with the queue's own "${parts[0]}" key`)
  }
  if (parts.length === 3 && ITERATION_ID.test(id)) {
    badId(`job id ${named} has the form of a job scheduler's run (repeat:<scheduler id>:<due ms>)`, 'use another first part than "repeat"')
  }
  return id
}

/** A job scheduler's id: a job id without ':' (its runs are repeat:<id>:<due ms>, three parts). */
export function validateSchedulerId(id: unknown): string {
  const valid = validateNewJobId(id)
  if (valid.includes(':')) badId(`job scheduler id ${describe(id)} holds ':': its runs' ids (repeat:<id>:<due ms>) must stay three parts`)
  return valid
}

const MAX_JOB_NAME_LENGTH = 256
const MAX_WORKER_NAME_LENGTH = 128
export function validateJobName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_JOB_NAME_LENGTH) {
    fail('ERR_JOB_NAME', `expected a job name of 1-${MAX_JOB_NAME_LENGTH} characters, got: ${describe(name)}`)
  }
  if (LONE_SURROGATE.test(name)) {
    fail('ERR_JOB_NAME', `expected a job name of well-formed text, got one with an unpaired surrogate: ${describe(name)}`)
  }
  return name
}

export function validateWorkerName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > MAX_WORKER_NAME_LENGTH || LONE_SURROGATE.test(name)) {
    fail('ERR_OPTIONS', `expected name to be well-formed text of 1-${MAX_WORKER_NAME_LENGTH} characters, got: ${describe(name)}`)
  }
  return name
}

export function validatePrefix(prefix: unknown): string {
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) {
    fail('ERR_OPTIONS', `expected prefix to be 1-64 characters from [A-Za-z0-9._:-], got: ${describe(prefix)}`)
  }
  return prefix
}

export const setting = (name: keyof typeof RANGES) => (value: unknown) => checkInteger(name, value, RANGES[name])

function clock(value: unknown): Clock {
  const c = value as Partial<Clock> | null
  if (!c || typeof c.now !== 'function' || typeof c.setTimeout !== 'function' || typeof c.clearTimeout !== 'function') {
    fail('ERR_OPTIONS', 'expected clock to have now(), setTimeout() and clearTimeout()')
  }
  return c as Clock
}

export interface QueueSettings {
  prefix: string
  maxDataBytes: number
  defaultJobOptions: JobSettings
  /** streams.events.maxLen: the events stream's cap, when given (else the scripts' default, 10,000). */
  eventsMaxLen: number | undefined
}

/** The events stream's cap: BullMQ's option shape, `streams: { events: { maxLen } }`. */
function eventsMaxLen(value: unknown): number | undefined {
  const streams = checkKnown('streams', value, ['events'])
  const events = checkKnown('streams.events', streams.events, ['maxLen'])
  return opt(events.maxLen, undefined, (v) => checkInteger('streams.events.maxLen', v, { min: 0, max: 100_000_000 }))
}

export function queueSettings(options: unknown): QueueSettings & { connection: unknown } {
  const o = checkKnown('Queue', options, ['connection', 'prefix', 'maxDataBytes', 'defaultJobOptions', 'streams'])
  return {
    connection: o.connection,
    prefix: opt(o.prefix, PREFIX_DEFAULT, validatePrefix),
    maxDataBytes: opt(o.maxDataBytes, MAX_DATA_BYTES_DEFAULT, setting('maxDataBytes')),
    defaultJobOptions: jobSettings('defaultJobOptions', o.defaultJobOptions, JOB_DEFAULTS),
    eventsMaxLen: eventsMaxLen(o.streams),
  }
}

export interface WorkerSettings {
  connection: unknown
  prefix: string
  /** Recorded on every job the worker takes (`workerName`), and in a stalled job's reason. */
  name: string
  concurrency: number
  lockDuration: number
  heartbeatInterval: number
  /** How long close() waits for running jobs (ms); undefined: until they end. */
  closeTimeout: number | undefined
  /** The worker's stalled sweep, every stalledInterval ms; 0 when skipStalledCheck (a reaper sweeps). */
  stalledInterval: number
  /** Stalls a job may have and still be recovered (BullMQ's maxStalledCount). */
  maxStalledCount: number
  /** Retention for jobs that have none of their own (BullMQ's worker removeOnComplete/removeOnFail; age in s). */
  removeOnComplete: Retention | undefined
  removeOnFail: Retention | undefined
  /** settings.backoffStrategy: a retry's wait for a job whose backoff type is not fixed or exponential. */
  backoffStrategy: BackoffStrategy | undefined
  clock: Clock
  /** At most `max` jobs started in any `duration` ms, across every worker of the queue; undefined for no limit. */
  limiter: { max: number; duration: number } | undefined
  /** BullMQ's autorun: the Worker takes jobs from its construction (true), or from worker.run() (false). */
  autorun: boolean
  /** How long getNextJob({ block: true }) waits for a job (s). */
  drainDelay: number
  /** The longest a rate-limited worker sleeps before it asks Redis again (ms; BullMQ's, 30000). */
  maximumRateLimitDelay: number
}

function limiter(value: unknown): { max: number; duration: number } {
  const o = checkKnown('limiter', value, ['max', 'duration'])
  return {
    max: checkInteger('limiter.max', o.max, { min: 1, max: 1_000_000 }),
    duration: checkInteger('limiter.duration', o.duration, { min: 1, max: MAX_DURATION_MS, unit: 'ms' }),
  }
}

/** BullMQ's settings.backoffStrategy: the wait before retry `attemptsMade` (ms); -1 fails the job instead. */
export type BackoffStrategy = (attemptsMade: number, type: string, err: unknown, job: unknown) => number | Promise<number>

/** A true-or-false option's check (ERR_OPTIONS otherwise). */
export const flag = (name: string) => (v: unknown) => {
  if (typeof v !== 'boolean') fail('ERR_OPTIONS', `expected ${name} to be true or false, got: ${describe(v)}`)
  return v
}

/**
 * BullMQ Worker options EchoMQ takes under BullMQ's names (docs/migrating-from-bullmq.md): `lockRenewTime` is
 * heartbeatInterval's; `autorun` (false: the Worker takes jobs once worker.run() is called); `drainDelay` (an idle
 * BullMQ worker's wait for a job, seconds) is how long getNextJob waits for one (a running EchoMQ worker waits
 * on its queue's marker however long); `maximumRateLimitDelay` as BullMQ's; `metrics: { maxDataPoints }`
 * (BullMQ's switch to start counting finished jobs) is checked and changes nothing: every EchoMQ queue counts
 * them per minute over the last hour (lib/queue/metrics.ts).
 */
const BULLMQ_WORKER_NAMES = ['autorun', 'drainDelay', 'lockRenewTime', 'maximumRateLimitDelay', 'metrics'] as const
const MAX_DRAIN_DELAY_S = 600

/** Seconds, as BullMQ's: not only whole ones. */
function drainDelay(v: unknown): number {
  if (typeof v !== 'number' || !(v > 0) || v > MAX_DRAIN_DELAY_S)
    fail('ERR_OPTIONS', `expected drainDelay to be a positive number of seconds, at most ${MAX_DRAIN_DELAY_S}, got: ${describe(v)}`)
  return v
}

function bullmqWorkerNames(o: Record<string, unknown>): void {
  if (o.lockRenewTime !== undefined && o.heartbeatInterval !== undefined && o.lockRenewTime !== o.heartbeatInterval) {
    fail('ERR_OPTIONS', "lockRenewTime is BullMQ's name for heartbeatInterval: give one of them")
  }
  if (o.metrics !== undefined) {
    const { maxDataPoints } = checkKnown('metrics', o.metrics, ['maxDataPoints'])
    if (maxDataPoints !== undefined) checkInteger('metrics.maxDataPoints', maxDataPoints, { min: 0, max: Number.MAX_SAFE_INTEGER })
  }
}

export function workerSettings(options: unknown): WorkerSettings {
  const o = checkKnown('Worker', options, [
    'connection',
    'prefix',
    'name',
    'concurrency',
    'lockDuration',
    'heartbeatInterval',
    'closeTimeout',
    'clock',
    'limiter',
    'stalledInterval',
    'maxStalledCount',
    'skipStalledCheck',
    'removeOnComplete',
    'removeOnFail',
    'settings',
    ...BULLMQ_WORKER_NAMES,
  ])
  bullmqWorkerNames(o)
  const lockDuration = opt(o.lockDuration, LOCK_DURATION_MS_DEFAULT, setting('lockDuration'))
  const strategy = checkKnown('settings', o.settings, ['backoffStrategy']).backoffStrategy
  if (strategy !== undefined && typeof strategy !== 'function')
    fail('ERR_OPTIONS', `expected settings.backoffStrategy to be a function, got: ${describe(strategy)}`)
  // The name the interval was given under, for its errors.
  const given = o.heartbeatInterval === undefined && o.lockRenewTime !== undefined ? 'lockRenewTime' : 'heartbeatInterval'
  const heartbeatInterval = opt(
    o.heartbeatInterval ?? o.lockRenewTime,
    Math.max(1, Math.floor(lockDuration * HEARTBEAT_FRACTION_DEFAULT)),
    (v) => checkInteger(given, v, RANGES.heartbeatInterval),
  )
  if (heartbeatInterval > lockDuration / 2) {
    fail(
      'ERR_OPTIONS',
      `expected ${given} (${heartbeatInterval} ms) to be at most half of lockDuration (${lockDuration} ms): ` +
        'a lease must outlive a missed renewal, or a short event-loop pause (a GC, a busy callback) lets it lapse ' +
        `and a sweep runs the job a second time elsewhere; a worker survives pauses of up to lockDuration - heartbeatInterval`,
    )
  }
  return {
    connection: o.connection,
    prefix: opt(o.prefix, PREFIX_DEFAULT, validatePrefix),
    name: opt(o.name, `${hostname()}:${process.pid}`, validateWorkerName),
    concurrency: opt(o.concurrency, CONCURRENCY_DEFAULT, setting('concurrency')),
    lockDuration,
    heartbeatInterval,
    closeTimeout: opt(o.closeTimeout, CLOSE_TIMEOUT_MS_DEFAULT, setting('closeTimeout')),
    stalledInterval: opt(o.skipStalledCheck, false, flag('skipStalledCheck'))
      ? 0
      : opt(o.stalledInterval, STALLED_INTERVAL_MS_DEFAULT, setting('stalledInterval')),
    maxStalledCount: opt(o.maxStalledCount, MAX_STALLED_COUNT_DEFAULT, setting('maxStalledCount')),
    removeOnComplete: opt(o.removeOnComplete, undefined, retention('removeOnComplete')),
    removeOnFail: opt(o.removeOnFail, undefined, retention('removeOnFail')),
    backoffStrategy: strategy as BackoffStrategy | undefined,
    clock: opt(o.clock, systemClock, clock),
    limiter: opt(o.limiter, undefined, limiter),
    autorun: opt(o.autorun, true, flag('autorun')),
    drainDelay: opt(o.drainDelay, DRAIN_DELAY_S_DEFAULT, drainDelay),
    maximumRateLimitDelay: opt(o.maximumRateLimitDelay, MAXIMUM_RATE_LIMIT_DELAY_MS_DEFAULT, (v) =>
      checkInteger('maximumRateLimitDelay', v, { min: 1, max: MAX_DURATION_MS, unit: 'ms' }),
    ),
  }
}

export interface SweepSettings {
  prefix: string
  graceMs: number
  limit: number
  audit: number
}

export function sweepSettings(options: unknown): SweepSettings {
  const o = checkKnown('sweep', options, ['prefix', 'graceMs', 'limit', 'audit'])
  return {
    prefix: opt(o.prefix, PREFIX_DEFAULT, validatePrefix),
    graceMs: opt(o.graceMs, SWEEP_GRACE_MS_DEFAULT, setting('graceMs')),
    limit: opt(o.limit, SWEEP_LIMIT_DEFAULT, setting('limit')),
    audit: opt(o.audit, SWEEP_AUDIT_DEFAULT, setting('audit')),
  }
}
