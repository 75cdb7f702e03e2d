/**
 * How a job's options are written in its hash for the scripts, and read back. A field whose value is the
 * default (lib/defaults.json) is not written at all: the scripts read an absent field as the default
 * (`luaDefaults`, prepended to every script by scripts.ts), so a job added with the defaults costs no
 * byte for them.
 */
import defaults from '../defaults.json' with { type: 'json' }

/** A retry's wait: a number (fixed, ms) or { type, delay, maxDelay?, jitter? } (job-options.ts validates it). */
export type Backoff = number | { type: BackoffType; delay?: number; maxDelay?: number; jitter?: number }
/** fixed, exponential, or a custom name the worker's settings.backoffStrategy handles (BullMQ's `type: 'custom'`). */
export type BackoffType = 'fixed' | 'exponential' | (string & {})
/**
 * A finished set's retention, BullMQ's KeepJobs: true (remove at once), false (keep all), a count, or
 * { count?, age?, limit? } with `age` in seconds (BullMQ's unit; a fraction is kept to the ms). `limit` (BullMQ:
 * most jobs removed per finish) is accepted and not stored: EchoMQ trims in batches of its own (retention.ts).
 */
export type Retention = boolean | number | { count?: number; age?: number; limit?: number }

/** "<type>,<delay>,<maxDelay>,<jitter>" (maxDelay 0 for none), or "" for no backoff. */
export function encodeBackoff(b: Backoff | undefined): string {
  if (b === undefined) return ''
  if (typeof b === 'number') return b > 0 ? `fixed,${b},0,0` : ''
  return `${b.type},${b.delay ?? 0},${b.maxDelay ?? 0},${b.jitter ?? 0}`
}

/** "<count>,<age in s>" with a part empty for no limit, "0" to remove at once, "" to keep all. */
export function encodeKeep(r: Retention): string {
  if (r === true) return '0'
  if (r === false) return ''
  if (typeof r === 'number') return `${r},`
  if (r.count === 0) return '0'
  return r.count === undefined && r.age === undefined ? '' : `${r.count ?? ''},${r.age ?? ''}`
}

/** encodeBackoff read back; undefined for none (or a text it never wrote). */
export function decodeBackoff(text: string | undefined): Backoff | undefined {
  const [type, delay, maxDelay, jitter] = (text ?? '').split(',')
  if (type === undefined || !/^[\w-]+$/.test(type) || delay === undefined) return undefined
  return {
    type,
    delay: Number(delay),
    ...(Number(maxDelay) > 0 ? { maxDelay: Number(maxDelay) } : {}),
    ...(Number(jitter) > 0 ? { jitter: Number(jitter) } : {}),
  }
}

/** encodeKeep read back: true (remove at once), false (keep all), a count, or { count?, age? }. */
export function decodeKeep(text: string): Retention {
  if (text === '0') return true
  if (text === '') return false
  const [count = '', age = ''] = text.split(',')
  if (age === '') return Number(count)
  return { ...(count === '' ? {} : { count: Number(count) }), age: Number(age) }
}

/** The most stack traces kept per job when `stackTraceLimit` is not given. */
export const STACK_TRACE_LIMIT_DEFAULT = defaults.stackTraceLimit

/** The defaults as a new job carries them, encoded as the scripts read them (lib/defaults.json). */
export const JOB_DEFAULTS = {
  attempts: defaults.attempts,
  keep: encodeKeep(defaults.removeOnComplete),
  keepFailed: encodeKeep(defaults.removeOnFail),
  stackTraceLimit: defaults.stackTraceLimit,
} as const

/** The defaults as Lua constants: what a field absent from a job hash means. */
export function luaDefaults(): string {
  const { attempts, keep, keepFailed, stackTraceLimit } = JOB_DEFAULTS
  return [
    '-- Generated from lib/defaults.json (lib/redis/encoding.ts): a job hash omits a field whose value is one of these.',
    `local DEFAULT_ATTEMPTS = ${attempts}`,
    `local DEFAULT_KEEP = { completed = '${keep}', failed = '${keepFailed}' }`,
    `local DEFAULT_STACK_TRACE_LIMIT = ${stackTraceLimit}`,
    `local DEFAULT_MAX_STALLED_COUNT = ${defaults.maxStalledCount}`,
    '',
  ].join('\n')
}
