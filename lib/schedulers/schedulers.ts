/**
 * Job schedulers (BullMQ's upsertJobScheduler and friends): a schedule and a job template, kept in Redis
 * (`<prefix>:{q}:schedulers`, one hash each), that produce a normal job per period, with a deterministic
 * id (`repeat:<scheduler id>:<due ms>`). Runs are made by whoever advances the schedule: a worker or the
 * sweep (iterations.ts), so a schedule keeps producing with no worker running. Changing a schedule (an
 * upsert with the same id) replaces its newest run if no worker has started it, unless the timing is
 * unchanged, so re-upserting at every start of an application never duplicates a run.
 */

import { EchoMQError } from '../errors.js'
import { type JobOptions, type JobSettings, jobSettings } from '../job-options.js'
import { toJson } from '../json.js'
import type { Untyped } from '../listeners.js'
import { validateJobName, validateSchedulerId } from '../options.js'
import { schedule, unschedule } from '../redis/commands.js'
import type { RedisClient } from '../redis/connection.js'
import { encodeOptions, storedOptionFields } from '../redis/job-codec.js'
import type { QueueKeys } from '../redis/keys.js'
import { readScheduler, schedulerIds, serverTimeMs } from '../redis/queries.js'
import { checkKnown, describe, fail, opt } from '../validate.js'
import { firstDue, type RepeatOptions, sameTiming, successorDue, timing, timingFields, timingFromHash } from './timing.js'

export type { RepeatOptions } from './timing.js'

/** The jobs a scheduler makes: BullMQ's jobTemplate (the options of `add`, but an id or a delay). */
export interface JobTemplate<Data = Untyped, Name extends string = string> {
  name?: Name
  data?: Data
  opts?: Omit<JobOptions, 'jobId' | 'delay'>
}

/** A scheduler as getJobScheduler gives it, in BullMQ 6's shape. */
export interface JobScheduler {
  key: string
  name: string
  /** When its next period is due (ms, Redis's clock); its run is made ahead only once a worker started the one before. */
  next: number
  iterationCount: number
  limit?: number
  startDate?: number
  endDate?: number
  tz?: string
  pattern?: string
  every?: number
  offset: number
  template?: { data?: unknown; opts?: Omit<JobOptions, 'jobId' | 'delay'> }
}

/** Tries of an upsert or a removal that another one raced. */
const RACE_TRIES = 5

/** The template as the scheduler hash's fields (the same names as a job's: iterations copy them). */
function templateFields(id: string, template: unknown, defaults: JobSettings, maxDataBytes: number): string[] {
  const t = checkKnown('job template', template, ['name', 'data', 'opts'])
  const name = opt(t.name, id, validateJobName)
  const data = toJson(t.data ?? {}, 'the template data', maxDataBytes, 'maxDataBytes')
  if (t.opts !== undefined && (t.opts as { jobId?: unknown; delay?: unknown }).jobId !== undefined) {
    fail('ERR_OPTIONS', 'a job template takes no jobId: each iteration gets repeat:<scheduler id>:<due ms>')
  }
  const o = jobSettings('template opts', t.opts, defaults)
  if (o.delay !== 0) fail('ERR_OPTIONS', `a job template takes no delay: the schedule says when, got: ${describe(o.delay)}`)
  // As add-7.lua stores a job: a field with the default value is left out (lib/redis/job-codec.ts). A
  // template keeps no lifo: its runs enter the line as iterate-11.lua puts them.
  const f = ['name', name, 'data', data, ...storedOptionFields({ ...encodeOptions(o), lifo: false })]
  if (t.opts !== undefined && Object.keys(t.opts as object).length > 0) f.push('opts', JSON.stringify(t.opts))
  return f
}

/**
 * Creates or changes scheduler `id`; resolves to its first run's id (its newest run's when the timing is
 * unchanged), or undefined when it makes none (its endDate has passed).
 */
export async function upsertScheduler(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  repeat: RepeatOptions,
  template: unknown,
  defaults: JobSettings,
  maxDataBytes: number,
): Promise<string | undefined> {
  validateSchedulerId(id)
  const t = timing(repeat)
  const fields = [...timingFields(t), ...templateFields(id, template, defaults, maxDataBytes)]
  for (let tries = 0; tries < RACE_TRIES; tries++) {
    const [existing, now] = await Promise.all([readScheduler(client, keys, id), serverTimeMs(client)])
    if (t.endDate !== undefined && t.endDate < now) {
      fail('ERR_OPTIONS', `End date must be greater than current timestamp: endDate ${new Date(t.endDate).toISOString()}`)
    }
    // The same timing keeps the schedule where it is, and its newest run (with the new template).
    const keep = existing !== undefined && sameTiming(timingFromHash(existing.hash), t)
    const first = keep ? existing.last : firstDue(t, now)
    if (first === undefined) return undefined
    const reply = await schedule(client, keys, {
      id,
      read: existing && { next: existing.next, last: existing.last },
      firstDue: first,
      // Used when the first is due at once (the script decides by Redis's clock).
      secondDue: keep ? undefined : successorDue(t, first),
      keep,
      fields,
    })
    if (reply !== 'retry') return reply.firstId
  }
  throw new EchoMQError('ERR_SCRIPT', `job scheduler ${id} kept changing while being upserted; try again`)
}

/** Scheduler `id` in BullMQ 6's shape, undefined when there is none. */
export async function getScheduler(client: RedisClient, keys: QueueKeys, id: string): Promise<JobScheduler | undefined> {
  const found = await readScheduler(client, keys, id)
  return found === undefined ? undefined : shape(id, found.hash, found.next)
}

/** Schedulers by when their next iteration is due (`asc`: soonest first), ranks as in Redis. */
export async function listSchedulers(
  client: RedisClient,
  keys: QueueKeys,
  start: number,
  end: number,
  asc: boolean,
): Promise<JobScheduler[]> {
  const ids = await schedulerIds(client, keys, start, end, asc)
  const found = await Promise.all(ids.map((id) => readScheduler(client, keys, id)))
  return ids.flatMap((id, i) => {
    const f = found[i]
    return f ? [shape(id, f.hash, f.next)] : []
  })
}

/** Removes scheduler `id` and its newest run if no worker has started it; resolves to whether there was one. */
export async function removeScheduler(client: RedisClient, keys: QueueKeys, id: string): Promise<boolean> {
  validateSchedulerId(id)
  for (let tries = 0; tries < RACE_TRIES; tries++) {
    const found = await readScheduler(client, keys, id)
    if (found === undefined) return false
    const reply = await unschedule(client, keys, id, found)
    if (reply !== 'retry') return reply
  }
  throw new EchoMQError('ERR_SCRIPT', `job scheduler ${id} kept changing while being removed; try again`)
}

function shape(id: string, h: Record<string, string>, due: number): JobScheduler {
  const t = timingFromHash(h)
  const s: JobScheduler = { key: id, name: h.name ?? id, next: due, iterationCount: Number(h.ic ?? 0), offset: t.offset }
  if (t.limit !== undefined) s.limit = t.limit
  if (t.startDate !== undefined) s.startDate = t.startDate
  if (t.endDate !== undefined) s.endDate = t.endDate
  if (t.tz !== undefined) s.tz = t.tz
  if (t.pattern !== undefined) s.pattern = t.pattern
  if (t.every !== undefined) s.every = t.every
  const template: NonNullable<JobScheduler['template']> = {}
  if (h.data !== undefined && h.data !== '{}') template.data = JSON.parse(h.data)
  if (h.opts !== undefined) template.opts = JSON.parse(h.opts)
  if (Object.keys(template).length > 0) s.template = template
  return s
}
