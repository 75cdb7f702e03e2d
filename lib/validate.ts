/**
 * The generic checks every option and setting goes through: integers within a stated range, known
 * option names (an unknown one gets the closest known name), well-formed text. Each failure is an
 * EchoMQError with a message saying what was expected and what was given.
 */
import { EchoMQError, type EchoMQErrorCode } from './errors.js'

/** setTimeout's ceiling. */
export const MAX_DURATION_MS = 2 ** 31 - 1

/** The accepted range of each numeric setting, wherever it is set (an option or the reaper's environment). */
export const RANGES = {
  attempts: { min: 1, max: 1_000_000 },
  concurrency: { min: 1, max: 10_000 },
  maxDataBytes: { min: 1, max: 512 * 1024 * 1024, unit: 'bytes' },
  lockDuration: { min: 1, max: MAX_DURATION_MS, unit: 'ms' },
  heartbeatInterval: { min: 1, max: MAX_DURATION_MS, unit: 'ms' },
  closeTimeout: { min: 1, max: MAX_DURATION_MS, unit: 'ms' },
  stalledInterval: { min: 1, max: MAX_DURATION_MS, unit: 'ms' },
  maxStalledCount: { min: 0, max: 1_000_000 },
  graceMs: { min: 0, max: 3_600_000, unit: 'ms' },
  limit: { min: 1, max: 1_000 },
  audit: { min: 0, max: 1_000 },
} as const satisfies Record<string, Range>

export interface Range {
  min: number
  max: number
  unit?: string
}

export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)
  if (typeof value === 'bigint') return `${value}n`
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value)
  if (typeof value === 'function') return 'a function'
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

export function fail(code: EchoMQErrorCode, message: string): never {
  throw new EchoMQError(code, message)
}

/** A UTF-16 surrogate without its pair: not well-formed text, and Redis would store it as U+FFFD. */
export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** Checks an integer setting against its range; `name` is what the user wrote (an option or a variable). */
export function checkInteger(name: string, value: unknown, { min, max, unit }: Range, code: EchoMQErrorCode = 'ERR_OPTIONS'): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = min === 1 && max >= MAX_DURATION_MS ? 'a positive integer' : `an integer from ${min} to ${max}`
    fail(code, `expected ${name} to be ${range}${unit ? ` (${unit})` : ''}, got: ${describe(value)}`)
  }
  return value
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

export function checkKnown(what: string, options: unknown, known: readonly string[]): Record<string, unknown> {
  if (options === undefined) return {}
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    fail('ERR_OPTIONS', `expected ${what} options to be an object, got: ${describe(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue
    // BullMQ's own words for an option it removed, which its programs may still pass.
    if (key === 'debounce') fail('ERR_OPTIONS', `Debounce option has been removed. Use deduplication option instead (${what})`)
    const closest = [...known].sort((a, b) => editDistance(key, a) - editDistance(key, b))[0]
    const hint = closest !== undefined && editDistance(key, closest) <= 3 ? ` (did you mean "${closest}"?)` : ''
    fail('ERR_OPTIONS', `unknown ${what} option "${key}"${hint}; known options: ${known.join(', ')}`)
  }
  return options as Record<string, unknown>
}

export const opt = <T>(value: unknown, fallback: T, check: (v: unknown) => T): T => (value === undefined ? fallback : check(value))
