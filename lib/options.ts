/**
 * Every option EchoMQ accepts is validated here, with its default stated once. Durations are integers in
 * milliseconds. Unknown option names are rejected with the closest known name, so a typo never silently
 * falls back to a default. Validation happens before any Redis call.
 */
import { EchoMQError, type EchoMQErrorCode } from './errors.js'
import { QUEUE_KEY_NAMES } from './keys.js'

export const PREFIX_DEFAULT = 'emq'
export const ATTEMPTS_DEFAULT = 3
export const MAX_DATA_BYTES_DEFAULT = 1024 * 1024
export const CONCURRENCY_DEFAULT = 1
export const LOCK_DURATION_MS_DEFAULT = 30_000
/** Heartbeat default is half the lease, so one missed tick never loses it. */
export const HEARTBEAT_FRACTION_DEFAULT = 0.5
export const CLOSE_TIMEOUT_MS_DEFAULT = 5_000
export const SWEEP_GRACE_MS_DEFAULT = 0
export const SWEEP_LIMIT_DEFAULT = 100
export const SWEEP_AUDIT_DEFAULT = 32

const MAX_ATTEMPTS = 1_000_000
const MAX_CONCURRENCY = 10_000
const MAX_DURATION_MS = 2 ** 31 - 1 // setTimeout's ceiling
const MAX_SWEEP_LIMIT = 1_000

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

function integer(name: string, value: unknown, min: number, max: number, unit = ''): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = min === 1 && max >= MAX_DURATION_MS ? 'a positive integer' : `an integer from ${min} to ${max}`
    fail('ERR_OPTIONS', `expected ${name} to be ${range}${unit}, got: ${describe(value)}`)
  }
  return value
}

function duration(name: string, value: unknown): number {
  return integer(name, value, 1, MAX_DURATION_MS, ' (ms)')
}

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
  now: () => Date.now(),
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
    maxDataBytes: opt(o.maxDataBytes, MAX_DATA_BYTES_DEFAULT, (v) => integer('maxDataBytes', v, 1, 512 * 1024 * 1024, ' (bytes)')),
  }
}

export interface AddSettings {
  attempts: number
  jobId: string | undefined
}

export function addSettings(options: unknown): AddSettings {
  const o = checkKnown('add', options, ['attempts', 'jobId'])
  return {
    attempts: opt(o.attempts, ATTEMPTS_DEFAULT, (v) => integer('attempts', v, 1, MAX_ATTEMPTS)),
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
  const o = checkKnown('Worker', options, ['connection', 'prefix', 'concurrency', 'lockDuration', 'heartbeatInterval', 'closeTimeout', 'clock'])
  const lockDuration = opt(o.lockDuration, LOCK_DURATION_MS_DEFAULT, (v) => duration('lockDuration', v))
  const heartbeatInterval = opt(o.heartbeatInterval, Math.max(1, Math.floor(lockDuration * HEARTBEAT_FRACTION_DEFAULT)), (v) =>
    duration('heartbeatInterval', v),
  )
  if (heartbeatInterval >= lockDuration) {
    fail('ERR_OPTIONS', `expected heartbeatInterval (${heartbeatInterval} ms) to be shorter than lockDuration (${lockDuration} ms)`)
  }
  return {
    connection: o.connection,
    prefix: opt(o.prefix, PREFIX_DEFAULT, validatePrefix),
    concurrency: opt(o.concurrency, CONCURRENCY_DEFAULT, (v) => integer('concurrency', v, 1, MAX_CONCURRENCY)),
    lockDuration,
    heartbeatInterval,
    closeTimeout: opt(o.closeTimeout, CLOSE_TIMEOUT_MS_DEFAULT, (v) => duration('closeTimeout', v)),
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
    graceMs: opt(o.graceMs, SWEEP_GRACE_MS_DEFAULT, (v) => integer('graceMs', v, 0, MAX_DURATION_MS, ' (ms)')),
    limit: opt(o.limit, SWEEP_LIMIT_DEFAULT, (v) => integer('limit', v, 1, MAX_SWEEP_LIMIT)),
    audit: opt(o.audit, SWEEP_AUDIT_DEFAULT, (v) => integer('audit', v, 0, MAX_SWEEP_LIMIT)),
  }
}
