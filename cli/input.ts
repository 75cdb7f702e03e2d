/**
 * The checks of what a user typed, shared by the commands so each flag means the same everywhere: numbers
 * with their range, lists given as repeated flags or commas, queue names, job ids and the prefix checked by
 * the library's own validators. Every failure is a usage error (exit 2) naming the flag, raised before any
 * Redis call, so bad input changes nothing.
 */

import { PREFIX_DEFAULT, validateJobId, validatePrefix, validateQueueName } from '../lib/options.js'
import { MAX_JOBS_PER_CALL } from '../lib/queue.js'
import { CliError, messageOf } from './errors.js'

/** The flags of `values` that are plain strings; `name` must be one of them, so a misspelt flag does not compile. */
type StringFlags<K extends string> = { readonly [k in K]?: string | undefined }

/** Runs a library validator; its error is a usage error. */
function checked<T>(validate: () => T): T {
  try {
    return validate()
  } catch (err) {
    throw new CliError(messageOf(err), true)
  }
}

/** An integer from 1 to `max`, or `fallback` when the flag is absent. */
export function positiveInt<K extends string>(values: StringFlags<K>, name: K, fallback: number, max: number): number {
  const raw = values[name]
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max)
    throw new CliError(`--${name} expects an integer from 1 to ${max}, got: ${raw}`, true)
  return Number(raw)
}

/** An integer from 0 (a rank), or `fallback` when the flag is absent. */
export function rank<K extends string>(values: StringFlags<K>, name: K, fallback: number): number {
  const raw = values[name]
  if (raw === undefined) return fallback
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw new CliError(`--${name} expects an integer from 0, got: ${raw}`, true)
  return Number(raw)
}

/** A repeatable flag's values, comma lists split, blanks dropped. */
export const listOf = (raw: string[] | undefined): string[] =>
  (raw ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean)

/** --queue values, validated; undefined when none is named (every registered queue). */
export function queueNames(raw: string[] | undefined): string[] | undefined {
  const names = listOf(raw)
  return names.length === 0 ? undefined : checked(() => names.map((q) => validateQueueName(q)))
}

/** The one queue a command names as its first argument. */
export function queueArg(positionals: string[], usage: string): string {
  const [queue] = positionals
  if (!queue) throw new CliError(`a queue name is needed: ${usage}`, true)
  return checked(() => validateQueueName(queue))
}

/** --id values (repeatable or comma lists), validated and without repeats. */
export function jobIds(raw: string[] | undefined): string[] {
  const ids = [...new Set(listOf(raw))]
  if (ids.length > MAX_JOBS_PER_CALL) throw new CliError(`--id takes at most ${MAX_JOBS_PER_CALL} ids, got ${ids.length}`, true)
  return ids.map((id) => validateJobId(id))
}

export const prefixOf = (values: { prefix?: string | undefined }): string => checked(() => validatePrefix(values.prefix ?? PREFIX_DEFAULT))

/** `raw` if it is one of `allowed` (for a flag with a fixed set of values), else a usage error naming them. */
export function oneOf<T extends string>(name: string, raw: string, allowed: readonly T[], { ignoreCase = false } = {}): T {
  const found = allowed.find((a) => a === (ignoreCase ? raw.toLowerCase() : raw))
  if (found === undefined) throw new CliError(`--${name} expects one of ${allowed.join(', ')}, got: ${raw}`, true)
  return found
}
