/**
 * Adding jobs: add-7.lua, one call per batch (addAll sends several in one MULTI).
 * Each function owns its script's KEYS and ARGV order and turns the reply into named results.
 */

import type { DeduplicationOptions } from '../deduplication.js'
import type { RedisClient } from './connection.js'
import { encodeDeduplication } from './deduplication.js'
import { type EncodedOptions, hasDefaultOptions, storedOptionFields } from './job-codec.js'
import type { QueueKeys } from './keys.js'
import { evalInTransaction, evalScript, eventKeys } from './script-runner.js'

/** The scripts this module runs (its part of SCRIPT_FILES in commands.ts). */
export const ADD_SCRIPTS = {
  add: 'add-7.lua',
} as const

/** A job to add: its id ('' for EchoMQ to give), name, data (JSON text) and options, encoded (job-codec.ts). */
export interface NewJob extends EncodedOptions {
  id: string
  name: string
  /** JSON text. */
  data: string
  /** Its deduplication (lib/deduplication.ts), with the holder the call expects (KnownHolders). */
  deduplication?: { spec: DeduplicationOptions; holder: string | null }
}

/** Each option's letter in add-7.lua (its OPTION_FIELDS), by the job hash's field. */
const OPTION_LETTERS: Record<string, string> = {
  attempts: 'a',
  delay: 'd',
  backoff: 'b',
  keep: 'k',
  keepFailed: 'f',
  keepLogs: 'l',
  priority: 'p',
  lifo: 'o',
  stackTraceLimit: 's',
}

/**
 * A job's options as add-7.lua takes them: only those not at their default, each its letter and its value
 * as the hash stores it, joined by ';' (no stored value holds one: numbers, a backoff's [A-Za-z][\w-]*
 * type, a retention's "<count>,<age>"). "" for the defaults.
 */
function packedOptions(j: NewJob): string {
  const fields = storedOptionFields(j)
  let out = ''
  for (let i = 0; i < fields.length; i += 2) out += `${out ? ';' : ''}${OPTION_LETTERS[fields[i] as string]}${fields[i + 1]}`
  return out
}

/** A call whose jobs all have the default options sends only their name and data (add-7.lua: the id is in the job's key). */
const shortArgs = (j: NewJob) => [j.name, j.data]
const ADD_FIELDS_SHORT = 2
const ADD_FIELDS = 3
/** A call with a deduplicated job: the 4th field its deduplication ("" for none). */
const ADD_FIELDS_DEDUPLICATED = 4

/**
 * Whether the jobs' ids are distinct: add-7.lua then checks them all with one EXISTS for the call. Ids the
 * Queue generates are (one counter, and a custom id is never an integer); custom ones are compared.
 */
function distinctIds(jobs: NewJob[]): boolean {
  if (jobs.length < 2) return true
  return new Set(jobs.map((j) => j.id)).size === jobs.length
}

/** add-7.lua's ARGV[1]: the fields per job, and 'u' when the ids are distinct. */
const fieldsArg = (fields: number, jobs: NewJob[]) => (distinctIds(jobs) ? `${fields}u` : String(fields))

/** add-7.lua's arguments: the short form when every job has the default options (most producers' adds). */
function addArgs(jobs: NewJob[]): string[] {
  if (jobs.some((j) => j.deduplication)) {
    return [
      fieldsArg(ADD_FIELDS_DEDUPLICATED, jobs),
      ...jobs.flatMap((j) => [
        j.name,
        j.data,
        packedOptions(j),
        j.deduplication ? encodeDeduplication(j.deduplication.spec, j.deduplication.holder) : '',
      ]),
    ]
  }
  return jobs.every(hasDefaultOptions)
    ? [fieldsArg(ADD_FIELDS_SHORT, jobs), ...jobs.flatMap(shortArgs)]
    : [fieldsArg(ADD_FIELDS, jobs), ...jobs.flatMap((j) => [j.name, j.data, packedOptions(j)])]
}

/**
 * add-7.lua's KEYS: the queue's, then each job's hash; in a call with a deduplication, then the
 * deduplication key of each job that has one, then the hash of each holder a job expects (and its logs,
 * with `replace`).
 */
function addKeys(keys: QueueKeys, jobs: NewJob[]): string[] {
  const queue = [keys.wait, keys.delayed, keys.marker, ...eventKeys(keys), keys.prioritized]
  const hashes = jobs.map((j) => keys.job(j.id))
  if (!jobs.some((j) => j.deduplication)) return [...queue, ...hashes]
  const deduplicated = jobs.flatMap((j) => (j.deduplication ? [j.deduplication] : []))
  return [
    ...queue,
    ...hashes,
    ...deduplicated.map((d) => keys.deduplication(d.spec.id)),
    // The holder's logs only for a replace, which deletes them.
    ...deduplicated.flatMap((d) => (d.holder ? (d.spec.replace ? [keys.job(d.holder), keys.logs(d.holder)] : [keys.job(d.holder)]) : [])),
  ]
}

/** What add-7.lua says of one job: added (1), its id taken (0), the holder of its deduplication id, '?<holder>' (not the one expected). */
type AddCode = number | string
/** add-7.lua's codes: a list (a call with a deduplication), else one character a job ('1' added, '0' taken). */
type AddCodes = AddCode[] | string

const codeList = (codes: AddCodes): AddCode[] => (typeof codes === 'string' ? Array.from(codes, (c) => (c === '1' ? 1 : 0)) : codes)

/**
 * The result of an add call, per job: added; held by (the holder's id, when deduplicated); stale, the
 * holder the call found when it expected another (null: none), the job not added: send it again.
 */
export interface AddResult {
  createdOn: number
  added: boolean[]
  heldBy: (string | undefined)[]
  stale: (string | null | undefined)[]
}

const isStale = (a: AddCode): a is string => typeof a === 'string' && a.startsWith('?')

const addResult = (createdOn: number, reply: AddCodes): AddResult => {
  const codes = codeList(reply)
  return {
    createdOn,
    added: codes.map((a) => a === 1),
    heldBy: codes.map((a) => (typeof a === 'string' && !isStale(a) ? a : undefined)),
    stale: codes.map((a) => (isStale(a) ? a.slice(1) || null : undefined)),
  }
}

/**
 * Stores jobs and pushes each on `wait` (or `delayed`); resolves to when they were created (ms, Redis's
 * clock) and, per job, whether it was added (false: its id was taken; nothing changed for it).
 */
export async function add(client: RedisClient, keys: QueueKeys, jobs: NewJob[]): Promise<AddResult> {
  const [createdOn, codes] = (await evalScript(client, ADD_SCRIPTS.add, addKeys(keys, jobs), addArgs(jobs))) as [number, AddCodes]
  return addResult(createdOn, codes)
}

/**
 * Adds jobs in calls of at most `perCall` jobs, sent in one MULTI: all or none (a Redis that refuses one,
 * out of memory, refuses the transaction). Resolves to each call's result, in order.
 */
export async function addAll(client: RedisClient, keys: QueueKeys, calls: NewJob[][]): Promise<AddResult[]> {
  if (calls.length === 1 && calls[0]) return [await add(client, keys, calls[0])]
  const replies = await evalInTransaction(
    client,
    ADD_SCRIPTS.add,
    calls.map((jobs) => ({ keys: addKeys(keys, jobs), args: addArgs(jobs) })),
  )
  return replies.map((reply) => {
    const [createdOn, codes] = reply as [number, AddCodes]
    return addResult(createdOn, codes)
  })
}
