/**
 * JSON text of what a job carries (its data, a processor's result), refusing what JSON would silently
 * change: the processor, or whoever reads the result, would get other values than were given.
 */
import { EchoMQError } from './errors.js'

/** Objects JSON stores as {} (their state is not in enumerable properties). */
const OPAQUE = [Map, Set, WeakMap, WeakSet, Error, RegExp, Promise] as const

/**
 * A JSON.stringify replacer that refuses NaN and ±Infinity (stored as null), functions and symbols
 * (dropped, or null in an array), `undefined` in an array (null), the OPAQUE objects ({}), binary data
 * (a Buffer or typed array becomes an object of numbers) and an invalid Date (null). A property whose
 * value is `undefined` is left out, and a Date becomes its ISO text, as JSON does.
 */
function jsonOnly(this: unknown, key: string, value: unknown): unknown {
  // Strings, booleans and finite numbers are what most values are: nothing to check (a null may be an
  // invalid Date's toJSON, so it is looked at below).
  const type = typeof value
  if (type === 'string' || type === 'boolean' || (type === 'number' && Number.isFinite(value))) return value
  // Named only when something is wrong (building the text for every key costs a busy producer).
  const at = () => (key === '' ? 'the value' : Array.isArray(this) ? `element ${key}` : `property ${JSON.stringify(key)}`)
  // What the caller gave, before its toJSON ran (a Buffer's, a Date's).
  const given = (this as Record<string, unknown>)[key]
  if (ArrayBuffer.isView(given) || given instanceof ArrayBuffer) {
    throw new Error(`${at()} is binary data, which JSON stores as an object of numbers (encode it, e.g. as base64)`)
  }
  if (given instanceof Date && Number.isNaN(given.getTime())) throw new Error(`${at()} is an invalid Date, which JSON stores as null`)
  if (type === 'number') throw new Error(`${at()} is ${value}, which has no JSON form`)
  if (type === 'function' || type === 'symbol') throw new Error(`${at()} is a ${type}, which has no JSON form`)
  if (value === undefined && Array.isArray(this)) throw new Error(`${at()} is undefined, which JSON stores as null`)
  if (type === 'object') {
    const opaque = OPAQUE.find((t) => value instanceof t)
    if (opaque) throw new Error(`${at()} is a ${opaque.name}, which JSON stores as {} (convert it to plain data first)`)
  }
  return value
}

/** `what` ("job data", "its result") names the value in messages; more than `maxBytes` of JSON
 * (`limit` names that setting) is refused too. */
export function toJson(value: unknown, what: string, maxBytes: number, limit = 'the limit'): string {
  let json: string | undefined
  try {
    json = JSON.stringify(value, jsonOnly)
  } catch (err) {
    throw new EchoMQError('ERR_JOB_DATA', `${what} is not JSON-serialisable: ${(err as Error).message}`, { cause: err })
  }
  if (json === undefined) throw new EchoMQError('ERR_JOB_DATA', `${what} is not JSON-serialisable: got ${typeof value}`)
  const bytes = Buffer.byteLength(json)
  if (bytes > maxBytes) throw new EchoMQError('ERR_JOB_DATA', `${what} is ${bytes} bytes as JSON, more than ${limit} (${maxBytes})`)
  return json
}
