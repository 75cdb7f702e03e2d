/**
 * Every option EchoMQ accepts is validated here, with its default stated once (in defaults.json, which
 * serverless.yml and the command's help read too) and its limits stated once (RANGES, which the reaper's
 * configuration uses for the same settings). Durations are integers in milliseconds. Unknown option
 * names are rejected with the closest known name, so a typo never silently falls back to a default.
 * Validation happens before any Redis call.
 */
import defaults from './defaults.json' with { type: 'json' }
import { EchoMQError, type EchoMQErrorCode } from './errors.js'
import { QUEUE_KEY_NAMES } from './keys.js'

export const DEFAULTS = defaults
export const PREFIX_DEFAULT = defaults.prefix
export const ATTEMPTS_DEFAULT = defaults.attempts
export const MAX_DATA_BYTES_DEFAULT = defaults.maxDataBytes
export const CONCURRENCY_DEFAULT = defaults.concurrency
export const LOCK_DURATION_MS_DEFAULT = defaults.lockDurationMs
/** Heartbeat default is half the lease, so one missed tick never loses it. */
export const HEARTBEAT_FRACTION_DEFAULT = 0.5
export const CLOSE_TIMEOUT_MS_DEFAULT = defaults.closeTimeoutMs
/**
 * close() returns within closeTimeout plus this: the time it gives the calls that return running jobs to
 * `wait`. Calls still unanswered then (a stalled link) finish in the background.
 */
export const CLOSE_MARGIN_MS = 250
export const SWEEP_GRACE_MS_DEFAULT = defaults.sweepGraceMs
export const SWEEP_LIMIT_DEFAULT = defaults.sweepLimit
export const SWEEP_AUDIT_DEFAULT = defaults.sweepAudit

/** setTimeout's ceiling. */
const MAX_DURATION_MS = 2 ** 31 - 1

/** The accepted range of each numeric setting, wherever it is set (an option or the reaper's environment). */
export const RANGES = {
  attempts: { min: 1, max: 1_000_000 },
  concurrency: { min: 1, max: 10_000 },
  maxDataBytes: { min: 1, max: 512 * 1024 * 1024, unit: 'bytes' },
  lockDuration: { min: 1, max: MAX_DURATION_MS, unit: 'ms' },
  heartbeatInterval: { min: 1, max: MAX_DURATION_MS, unit: 'ms' },
  closeTimeout: { min: 1, max: MAX_DURATION_MS, unit: 'ms' },
  graceMs: { min: 0, max: 3_600_000, unit: 'ms' },
  limit: { min: 1, max: 1_000 },
  audit: { min: 0, max: 1_000 },
} as const satisfies Record<string, Range>

export interface Range {
  min: number
  max: number
  unit?: string
}

const QUEUE_NAME = /^[A-Za-z0-9._:-]{1,128}$/
const JOB_ID = /^[A-Za-z0-9._-]{1,128}$/
const PREFIX = /^[A-Za-z0-9._:-]{1,64}$/
/** Ids that would make the job's key collide with one of the queue's own keys. */
const RESERVED_JOB_IDS: ReadonlySet<string> = new Set(QUEUE_KEY_NAMES)

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)
  if (typeof value === 'bigint') return `${value}n`
  if (typeof value === 'function') return 'a function'
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

function fail(code: EchoMQErrorCode, message: string): never {
  throw new EchoMQError(code, message)
}

export function validateQueueName(name: unknown): string {
  if (typeof name !== 'string' || !QUEUE_NAME.test(name)) {
    fail('ERR_QUEUE_NAME', `expected a queue name of 1-128 characters from [A-Za-z0-9._:-], got: ${describe(name)}`)
  }
  return name
}

export function validateJobId(id: unknown): string {
  if (typeof id !== 'string' || !JOB_ID.test(id)) {
    fail('ERR_JOB_ID', `expected a job id of 1-128 characters from [A-Za-z0-9._-], got: ${describe(id)}`)
  }
  if (RESERVED_JOB_IDS.has(id)) {
    fail('ERR_JOB_ID', `job id ${describe(id)} is reserved: it would collide with the queue's own "${id}" key`)
  }
  return id
}

export function validatePrefix(prefix: unknown): string {
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) {
    fail('ERR_OPTIONS', `expected prefix to be 1-64 characters from [A-Za-z0-9._:-], got: ${describe(prefix)}`)
  }
  return prefix
}

/** Checks an integer setting against its range; `name` is what the user wrote (an option or a variable). */
export function checkInteger(name: string, value: unknown, { min, max, unit }: Range, code: EchoMQErrorCode = 'ERR_OPTIONS'): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = min === 1 && max >= MAX_DURATION_MS ? 'a positive integer' : `an integer from ${min} to ${max}`
    fail(code, `expected ${name} to be ${range}${unit ? ` (${unit})` : ''}, got: ${describe(value)}`)
  }
  return value
}

const setting = (name: keyof typeof RANGES) => (value: unknown) => checkInteger(name, value, RANGES[name])

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      row[j] = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost)
    }
    prev = row
  }
  return prev[b.length] ?? 0
}

function checkKnown(what: string, options: unknown, known: readonly string[]): Record<string, unknown> {
  if (options === undefined) return {}
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    fail('ERR_OPTIONS', `expected ${what} options to be an object, got: ${describe(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue
    const closest = [...known].sort((a, b) => editDistance(key, a) - editDistance(key, b))[0]
    const hint = closest !== undefined && editDistance(key, closest) <= 3 ? ` (did you mean "${closest}"?)` : ''
    fail('ERR_OPTIONS', `unknown ${what} option "${key}"${hint}; known options: ${known.join(', ')}`)
  }
  return options as Record<string, unknown>
}

const opt = <T>(value: unknown, fallback: T, check: (v: unknown) => T): T => (value === undefined ? fallback : check(value))

export interface Clock {
  now(): number
  setTimeout(fn: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

export const systemClock: Clock = {
  // Monotonic: a wall-clock step (NTP) must not move a lease deadline or the close deadline.
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
}

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
}

export function queueSettings(options: unknown): QueueSettings & { connection: unknown } {
  const o = checkKnown('Queue', options, ['connection', 'prefix', 'maxDataBytes'])
  return {
    connection: o.connection,
    prefix: opt(o.prefix, PREFIX_DEFAULT, validatePrefix),
    maxDataBytes: opt(o.maxDataBytes, MAX_DATA_BYTES_DEFAULT, setting('maxDataBytes')),
  }
}

export interface AddSettings {
  attempts: number
  jobId: string | undefined
}

export function addSettings(options: unknown): AddSettings {
  const o = checkKnown('add', options, ['attempts', 'jobId'])
  return {
    attempts: opt(o.attempts, ATTEMPTS_DEFAULT, setting('attempts')),
    jobId: opt(o.jobId, undefined, validateJobId),
  }
}

export interface WorkerSettings {
  connection: unknown
  prefix: string
  concurrency: number
  lockDuration: number
  heartbeatInterval: number
  closeTimeout: number
  clock: Clock
}

export function workerSettings(options: unknown): WorkerSettings {
  const o = checkKnown('Worker', options, [
    'connection',
    'prefix',
    'concurrency',
    'lockDuration',
    'heartbeatInterval',
    'closeTimeout',
    'clock',
  ])
  const lockDuration = opt(o.lockDuration, LOCK_DURATION_MS_DEFAULT, setting('lockDuration'))
  const heartbeatInterval = opt(
    o.heartbeatInterval,
    Math.max(1, Math.floor(lockDuration * HEARTBEAT_FRACTION_DEFAULT)),
    setting('heartbeatInterval'),
  )
  if (heartbeatInterval > lockDuration / 2) {
    fail(
      'ERR_OPTIONS',
      `expected heartbeatInterval (${heartbeatInterval} ms) to be at most half of lockDuration (${lockDuration} ms): ` +
        'a lease must outlive a missed renewal, or a short event-loop pause (a GC, a busy callback) lets it lapse ' +
        `and a sweep runs the job a second time elsewhere; a worker survives pauses of up to lockDuration - heartbeatInterval`,
    )
  }
  return {
    connection: o.connection,
    prefix: opt(o.prefix, PREFIX_DEFAULT, validatePrefix),
    concurrency: opt(o.concurrency, CONCURRENCY_DEFAULT, setting('concurrency')),
    lockDuration,
    heartbeatInterval,
    closeTimeout: opt(o.closeTimeout, CLOSE_TIMEOUT_MS_DEFAULT, setting('closeTimeout')),
    clock: opt(o.clock, systemClock, clock),
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
