/**
 * A run's take and its lease: taking jobs (take-11.lua), handing reservations back (requeue, unreserve) and
 * renewing leases (extend-2.lua, with reclaim-2.lua for a lapsed one).
 * Each function owns its script's KEYS and ARGV order and turns the reply into named results.
 */

import type { JobFields } from '../job.js'
import type { RedisClient } from './connection.js'
import { ATTEMPTS_STARTED_AT, CREATED_ON_AT, jobFromFields, parentRun, plainRun, STARTED_ON_AT } from './job-codec.js'
import type { QueueKeys } from './keys.js'
import { evalScript, eventKeys, jobKeyPairs, type NextDue, nextDue, prioritizedKeys } from './script-runner.js'

/** The scripts this module runs (its part of SCRIPT_FILES in commands.ts). */
export const TAKE_SCRIPTS = {
  take: 'take-11.lua',
  unreserve: 'unreserve-5.lua',
  requeue: 'requeue-5.lua',
  extend: 'extend-2.lua',
  reclaim: 'reclaim-2.lua',
} as const

/**
 * The most bytes of job data one take returns (a job larger than this is still taken, alone): a reply
 * of many large jobs would hold Redis for as long as it takes to build it.
 */
export const TAKE_MAX_BYTES = 1024 * 1024

export interface Taken {
  /** The job's fields as taken (the Worker makes its Job of them). */
  job: JobFields
  /** The run's token: `<worker token>:<start number>`, the value of its lease. */
  token: string
  /** Its finish need read only its token (job-codec.ts plainRun): FinishRun.plain. */
  plain: boolean
  /** Its job is a flow's parent (job-codec.ts parentRun): FinishRun.parent. */
  parent: boolean
}

/**
 * A job's fields as takeJobs.lua sends them back: its FIELD_AT fields up to the last one present, attemptsStarted
 * absent for 1, createdOn against the call's time, and in the token's place when the run started
 * before this call (a run handed back again) its startedOn (job-codec.ts jobFromFields); those after
 * data coded (fieldsOf).
 */
type FieldsReply = (string | null)[]

/** Per job its id, how many fields, then the fields: all in one list (a list per job cost Redis a table each). */
export type TakenReply = (string | number | null)[]

/** Calls `each` with every job of a flat reply: its id and its fields as sent. */
function eachJob(reply: TakenReply, each: (id: string, sent: FieldsReply) => void): void {
  for (let i = 0; i + 1 < reply.length; ) {
    const n = Number(reply[i + 1])
    each(reply[i] as string, reply.slice(i + 2, i + 2 + n) as FieldsReply)
    i += 2 + n
  }
}

/** The run's token, which the reply leaves out: the taker's token and the start number (`attemptsStarted`). */
const tokenOf = (taker: Taker, fields: FieldsReply): string => `${taker.workerToken}:${fields[ATTEMPTS_STARTED_AT] ?? 1}`

/** The first fields sent by place (name, data); the rest each as a letter and its value. */
const CODED_FROM = CREATED_ON_AT

/**
 * A job's fields by place (FIELD_AT's order, job-codec.ts jobFromFields) from what takeJobs.lua's replyFields
 * sent: after data only the fields present, each as the letter of its place ('a' + its index) and
 * its value. An absent field is left a hole (undefined).
 */
function fieldsOf(sent: FieldsReply): FieldsReply {
  if (sent.length <= CODED_FROM) return sent
  const fields = sent.slice(0, CODED_FROM)
  for (let i = CODED_FROM; i < sent.length; i++) {
    const coded = sent[i] as string
    fields[coded.charCodeAt(0) - 97] = coded.slice(1)
  }
  return fields
}

/** A list's name and createdOn as sent: absent, the job's before in the same list (takeJobs.lua replyFields). */
function sameAsBefore(): (sent: FieldsReply) => FieldsReply {
  let name: string | null = null
  let created: string | null = null
  return (sent) => {
    const fields = fieldsOf(sent)
    if (fields[0] == null) fields[0] = name
    else name = fields[0]
    if (fields[CREATED_ON_AT] == null) fields[CREATED_ON_AT] = created
    else created = fields[CREATED_ON_AT] as string
    return fields
  }
}

/** `now`: the call's time (Redis's clock, ms), the reply's last element. */
export function toTaken(reply: TakenReply, now: number, taker: Taker): Taken[] {
  const taken: Taken[] = []
  const nowText = String(now)
  const chain = sameAsBefore()
  eachJob(reply, (id, sent) => {
    const fields = chain(sent)
    const startedOn = fields[STARTED_ON_AT]
    taken.push({
      job: jobFromFields(id, fields, nowText, startedOn == null ? now : Number(startedOn), taker.workerName),
      token: tokenOf(taker, fields),
      plain: plainRun(fields),
      parent: parentRun(fields),
    })
  })
  return taken
}

/** A job read into a worker's hand (reserved, not taken until it starts). */
export interface Handed extends Taken {
  /** It waited in `prioritized`: its take drops the score its reservation kept. */
  scored: boolean
}

/** As TakenReply. */
export type HandedReply = TakenReply

/** `startedOn` is when they were read (`readAt`), until they start; `now`, the call's time. */
export function toHanded(reply: HandedReply, now: number, readAt: number, taker: Taker): Handed[] {
  const handed: Handed[] = []
  const nowText = String(now)
  const chain = sameAsBefore()
  eachJob(reply, (id, sent) => {
    const fields = chain(sent)
    const job = jobFromFields(id, fields, nowText, readAt, taker.workerName)
    handed.push({ job, token: tokenOf(taker, fields), plain: plainRun(fields), parent: parentRun(fields), scored: (job.priority ?? 0) > 0 })
  })
  return handed
}

/** The worker taking jobs. */
export interface Taker {
  /** The lease value is `<workerToken>:<start number>`. */
  workerToken: string
  leaseMs: number
  /** Recorded on each job taken (`workerName`). */
  workerName: string
  /** The worker's limiter: at most `max` starts in any `duration` ms across every worker (max 0: none). */
  limit?: { max: number; duration: number }
}

/** The limiter's ARGV: most starts per window, the window (ms). */
export const limitArgs = (t: Taker) => [t.limit?.max ?? 0, t.limit?.duration ?? 0]

/** A reply's waitMs when the queue runs as many jobs as its global concurrency (queue.setGlobalConcurrency) allows. */
export const MAXED = -2

export interface TakeResult extends NextDue {
  taken: Taken[]
  /** Candidates left where they were (reserved, or waiting): the reply was full (TAKE_MAX_BYTES), or the limiter said so. */
  left: string[]
  /** ms to wait before taking again (the limiter, or queue.rateLimit), 0 for none, -1 while the queue is paused, MAXED at its global concurrency. */
  waitMs: number
  /** Ids reserved for this worker in place of candidates another worker took first (see `onMiss`). */
  reserved: string[]
}

/** What a take reserves in place of candidates it finds gone: at most `max` ids, for `reserveMs`. */
export interface OnMiss {
  max: number
  reserveMs: number
}

/**
 * Takes candidates, each with a lease of `leaseMs`: ids read from `wait` (readCandidates), or, with
 * `reserved`, ids this worker reserved (a finish's `reserve`). With `onMiss`, a candidate found gone (an
 * other worker took it first) is replaced by a reservation, which the next take gets for certain.
 */
export async function take(
  client: RedisClient,
  keys: QueueKeys,
  taker: Taker,
  ids: string[],
  reserved = false,
  onMiss: OnMiss = { max: 0, reserveMs: 1 },
): Promise<TakeResult> {
  const [taken, left, dueIn, dueAt, waitMs, reservedNext, now] = (await evalScript(
    client,
    TAKE_SCRIPTS.take,
    [
      keys.wait,
      keys.active,
      keys.marker,
      keys.reserved,
      keys.delayed,
      ...eventKeys(keys),
      ...prioritizedKeys(keys),
      keys.limiter,
      ...jobKeyPairs(keys, ids),
    ],
    [
      taker.workerToken,
      taker.leaseMs,
      taker.workerName,
      TAKE_MAX_BYTES,
      reserved ? 'r' : 'w',
      ...limitArgs(taker),
      onMiss.max,
      onMiss.reserveMs,
    ],
  )) as [TakenReply, string[], number, number, number, string[], number]
  return { taken: toTaken(taken, now, taker), left, ...nextDue(dueIn, dueAt), waitMs, reserved: reservedNext }
}

/** Returns up to `n` reservations past their expiry (a dead worker's) to the front of `wait`; resolves to how many. */
export async function requeueExpired(client: RedisClient, keys: QueueKeys, n: number): Promise<number> {
  return (await evalScript(client, TAKE_SCRIPTS.requeue, [keys.reserved, keys.wait, keys.marker, ...prioritizedKeys(keys)], [n])) as number
}

/** Returns ids this worker reserved and will not take to the front of `wait`; resolves to how many went back. */
export async function unreserve(client: RedisClient, keys: QueueKeys, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0
  return (await evalScript(
    client,
    TAKE_SCRIPTS.unreserve,
    [keys.reserved, keys.wait, keys.marker, ...prioritizedKeys(keys)],
    ids,
  )) as number
}

// ---- extend (heartbeat), with reclaim ------------------------------------------------------------------

export interface Lease {
  id: string
  token: string
}

/** A lease to renew; `index`: also refresh its deadline in the lease index (every other renewal). */
export interface Renewal extends Lease {
  index: boolean
}

/**
 * What a renewal found: `renewed`; `reclaimed`, a lease that lapsed (a paused worker) and was taken back
 * because no sweep had recovered the job yet; `lost`, the job was recovered, finished or is held by
 * another token.
 */
export type LeaseStatus = 'renewed' | 'reclaimed' | 'lost'

const EXTEND_CODES: Record<number, LeaseStatus | 'lapsed'> = { 0: 'lost', 1: 'renewed', 3: 'lapsed' }
const RECLAIM_CODES: Record<number, LeaseStatus> = { 0: 'lost', 1: 'renewed', 2: 'reclaimed' }

/**
 * Renews leases, one status per lease in order. Leases that lapsed need the job's hash to judge, so they
 * go to a second script; normally there are none.
 */
export async function extend(client: RedisClient, keys: QueueKeys, leaseMs: number, renewals: Renewal[]): Promise<LeaseStatus[]> {
  // The script refreshes the index of its first k leases.
  const leases = [...renewals.filter((r) => r.index), ...renewals.filter((r) => !r.index)]
  const k = leases.length - renewals.filter((r) => !r.index).length
  const sorted = (await evalScript(
    client,
    TAKE_SCRIPTS.extend,
    [keys.active, keys.stalled, ...leases.map((l) => keys.lock(l.id))],
    [String(leaseMs), k, ...leases.map((l) => l.token), ...leases.slice(0, k).map((l) => l.id)],
  )) as string
  const codeOf = new Map(leases.map((l, i) => [l, Number(sorted[i])]))
  const codes = renewals.map((r) => codeOf.get(r) ?? 0)
  const found = codes.map((code) => EXTEND_CODES[code] ?? 'lost')
  const lapsed = renewals.filter((_, i) => found[i] === 'lapsed')
  if (lapsed.length === 0) return found as LeaseStatus[]
  const reclaimed = (await evalScript(
    client,
    TAKE_SCRIPTS.reclaim,
    [
      keys.active,
      keys.stalled,
      ...jobKeyPairs(
        keys,
        lapsed.map((l) => l.id),
      ),
    ],
    [leaseMs, ...lapsed.flatMap(({ id, token }) => [id, token])],
  )) as number[]
  let next = 0
  return found.map((status) => (status === 'lapsed' ? (RECLAIM_CODES[reclaimed[next++] ?? 0] ?? 'lost') : status))
}
