/**
 * The one module that runs Lua scripts. Each function here owns one script's KEYS and ARGV order and
 * turns its reply into named results; everything else (the Queue, the Worker, the sweep, the command,
 * the benchmarks and the tests) calls these functions. The plain commands are in queries.ts. Scripts run with EVALSHA, falling back to EVAL on
 * NOSCRIPT (a restarted or failed-over Redis has an empty script cache; EVAL also re-caches it). Every
 * call passes at least one key, so Redis Cluster routes it to the queue's slot.
 */

import type { DeduplicationOptions } from '../deduplication.js'
import { EchoMQError } from '../errors.js'
import { type JobFields, type JobState, jobFromFields, type SweepCounts } from '../job.js'
import type { RedisClient } from './connection.js'
import { encodeDeduplication } from './deduplication.js'
import { JOB_DEFAULTS } from './encoding.js'
import type { QueueKeys } from './keys.js'
import { loadScript, type Script } from './scripts.js'

export { loadScript, setScriptWrapper } from './scripts.js'

/** Every script file, by the command that runs it. */
export const SCRIPT_FILES = {
  add: 'add-7.lua',
  take: 'take-11.lua',
  unreserve: 'unreserve-5.lua',
  requeue: 'requeue-5.lua',
  extend: 'extend-2.lua',
  reclaim: 'reclaim-2.lua',
  finish: 'finish-15.lua',
  probe: 'probe-12.lua',
  claim: 'claim-1.lua',
  settle: 'settle-1.lua',
  sweepStep: 'sweep-10.lua',
  promote: 'promote-7.lua',
  promoteJob: 'promoteJob-8.lua',
  trim: 'trim-2.lua',
  retry: 'retry-7.lua',
  remove: 'remove-13.lua',
  pause: 'pause-6.lua',
  progress: 'progress-5.lua',
  log: 'log-3.lua',
  clean: 'clean-4.lua',
  drain: 'drain-6.lua',
  obliterate: 'obliterate-15.lua',
  limit: 'limit-1.lua',
  schedule: 'schedule-14.lua',
  iterate: 'iterate-11.lua',
  unschedule: 'unschedule-12.lua',
  listen: 'listen-1.lua',
  invocation: 'invocation-1.lua',
  backlog: 'backlog-5.lua',
  // Changing a job, and deduplication (the functions at the end of this module).
  updateData: 'updateData-1.lua',
  changePriority: 'changePriority-5.lua',
  moveToDelayed: 'moveToDelayed-9.lua',
  extendLock: 'extendLock-3.lua',
  unhold: 'unhold-2.lua',
} as const

/**
 * The most bytes of job data one take returns (a job larger than this is still taken, alone): a reply
 * of many large jobs would hold Redis for as long as it takes to build it.
 */
export const TAKE_MAX_BYTES = 1024 * 1024

/** Most script calls whose writes are held back together: Redis starts on a burst's first while the rest are written. */
const CORK_MAX = 8
const corked = new WeakMap<object, number>()

/**
 * Holds a connection's writes until the end of this tick, CORK_MAX calls at a time, so the script calls a
 * busy worker makes in one tick (one per finished job) leave in one write instead of one each: a socket
 * write per command was the largest single cost of a busy worker. The first call of a tick goes out at
 * once (a lone call, as a worker at concurrency 1 makes, waits for nothing); the holding starts with the
 * second. Only for a plain connection (ioredis's `stream`); a Cluster writes as it always does.
 */
function corkUntilTick(client: RedisClient): void {
  const stream = (client as { stream?: { cork?: () => void; uncork?: () => void; writable?: boolean } }).stream
  if (!stream?.cork || !stream.uncork || !stream.writable) return
  const calls = corked.get(stream)
  if (calls === undefined) {
    corked.set(stream, 0)
    process.nextTick(() => {
      if ((corked.get(stream) ?? 0) > 0) stream.uncork?.()
      corked.delete(stream)
    })
    return
  }
  if (calls === 0 || calls + 1 >= CORK_MAX) {
    if (calls > 0) stream.uncork()
    stream.cork()
    corked.set(stream, 1)
    return
  }
  corked.set(stream, calls + 1)
}

type Flat = (...args: (string | number | (string | number)[])[]) => Promise<unknown>

async function evalScript(client: RedisClient, file: string, keys: string[], args: (string | number)[]): Promise<unknown> {
  const script: Script = loadScript(file)
  corkUntilTick(client)
  if (keys.length < script.fixedKeys || keys.length === 0) {
    throw new EchoMQError('ERR_SCRIPT', `${script.name} needs at least ${Math.max(1, script.fixedKeys)} keys, got ${keys.length}`)
  }
  try {
    // ioredis flattens array arguments itself (its types say otherwise): no copy of keys and arguments here.
    return await (client.evalsha as Flat)(script.sha, keys.length, keys, args)
  } catch (err) {
    if (err instanceof Error && err.message.startsWith('NOSCRIPT')) {
      return await (client.eval as Flat)(script.lua, keys.length, keys, args).catch((e: unknown) => {
        throw refusedInScript(e, script)
      })
    }
    throw refusedInScript(err, script)
  }
}

/**
 * Redis names neither the command nor the rule when an ACL refuses a command inside a script, only the
 * script's line: this names the command on that line, so the error can say what to grant.
 */
function refusedInScript(err: unknown, script: Script): unknown {
  const line =
    err instanceof Error ? /can't run this command or subcommand script: \w+, on @user_script:(\d+)/.exec(err.message)?.[1] : undefined
  if (line === undefined) return err
  const command = /(?:rcall|redis\.p?call)\(\s*'(\w+)'/.exec(script.lua.split('\n')[Number(line) - 1] ?? '')?.[1]
  if (command === undefined) return err
  ;(err as Error).message += ` (${script.name}, refused inside the script: ${command.toUpperCase()})`
  return err
}

/** Loads every script into Redis's cache, so a first call is an EVALSHA (for benchmarks). */
export async function preloadScripts(client: RedisClient): Promise<void> {
  for (const file of Object.values(SCRIPT_FILES)) await client.script('LOAD', loadScript(file).lua)
}

const jobKeyPairs = (keys: QueueKeys, ids: string[]) => ids.flatMap((id) => [keys.job(id), keys.lock(id)])
/** A job's hash and log: what is deleted with a job. */
const jobAndLogs = (keys: QueueKeys, ids: string[]) => ids.flatMap((id) => [keys.job(id), keys.logs(id)])
/** What a script that emits events needs: meta (the stream's cap), the stream and the listened key. */
const eventKeys = (keys: QueueKeys) => [keys.meta, keys.events, keys.listened]

// ---- add ---------------------------------------------------------------------------------------------

export interface NewJob {
  id: string
  name: string
  /** JSON text. */
  data: string
  attempts: number
  /** ms before the job may run; 0 for none. */
  delayMs: number
  /** Encoded backoff, "<type>,<delay>,<maxDelay>,<jitter>", or "" (see lua/includes/backoff.lua). */
  backoff: string
  /** Encoded retention in `completed` and in `failed` (see lua/includes/retention.lua). */
  keep: string
  keepFailed: string
  /** Log lines kept, or undefined for all. */
  keepLogs: number | undefined
  /** 0 for none, else 1 (highest) .. 2^21 - 1. */
  priority: number
  /** To the front of `wait` (a job without a priority). */
  lifo: boolean
  /** Stack traces kept (job.stacktrace). */
  stackTraceLimit: number
  /** Its deduplication (lib/deduplication.ts), with the holder the call expects (KnownHolders). */
  deduplication?: { spec: DeduplicationOptions; holder: string | null }
}

/** The ARGV of one job in add-7.lua, in its order. */
const jobArgs = (j: NewJob) => [
  j.id,
  j.name,
  j.data,
  j.attempts,
  j.delayMs,
  j.backoff,
  j.keep,
  j.keepFailed,
  j.keepLogs ?? '',
  j.priority,
  j.lifo ? '1' : '',
  j.stackTraceLimit,
]
const ADD_FIELDS = 12
/** True when every option of a new job is the default: its hash then holds no field for any of them. */
function hasDefaultOptions(j: NewJob): boolean {
  return (
    j.attempts === JOB_DEFAULTS.attempts &&
    j.delayMs === 0 &&
    j.backoff === '' &&
    j.keep === JOB_DEFAULTS.keep &&
    j.keepFailed === JOB_DEFAULTS.keepFailed &&
    j.keepLogs === undefined &&
    j.priority === 0 &&
    !j.lifo &&
    j.stackTraceLimit === JOB_DEFAULTS.stackTraceLimit
  )
}

/** A call whose jobs all have the default options sends only their id, name and data (add-7.lua). */
const shortArgs = (j: NewJob) => [j.id, j.name, j.data]
const ADD_FIELDS_SHORT = 3

/** add-7.lua's arguments: the short form when every job has the default options (most producers' adds). */
function addArgs(jobs: NewJob[]): (string | number)[] {
  if (jobs.some((j) => j.deduplication)) return [ADD_FIELDS + 1, ...jobs.flatMap(deduplicatedArgs)]
  return jobs.every(hasDefaultOptions) ? [ADD_FIELDS_SHORT, ...jobs.flatMap(shortArgs)] : [ADD_FIELDS, ...jobs.flatMap(jobArgs)]
}

/** A call with a deduplicated job: 13 fields a job, the 13th its deduplication ("" for none). */
const deduplicatedArgs = (j: NewJob) => [
  ...jobArgs(j),
  j.deduplication ? encodeDeduplication(j.deduplication.spec, j.deduplication.holder) : '',
]

/** add-7.lua's KEYS: the queue's, then each job's hash (with a deduplication: its key and the holder's hash and logs). */
function addKeys(keys: QueueKeys, jobs: NewJob[]): string[] {
  const queue = [keys.wait, keys.delayed, keys.marker, ...eventKeys(keys), keys.prioritized]
  if (!jobs.some((j) => j.deduplication)) return [...queue, ...jobs.map((j) => keys.job(j.id))]
  return [
    ...queue,
    ...jobs.flatMap((j) => {
      const d = j.deduplication
      // Without a holder (or a deduplication) the job's own keys stand in: the script does not touch them as a holder's.
      const holder = d?.holder ?? j.id
      return [keys.job(j.id), keys.deduplication(d?.spec.id ?? ''), keys.job(holder), keys.logs(holder)]
    }),
  ]
}

/** What add-7.lua says of one job: added (1), its id taken (0), the holder of its deduplication id, '?<holder>' (not the one expected). */
type AddCode = number | string

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

const addResult = (createdOn: number, codes: AddCode[]): AddResult => ({
  createdOn,
  added: codes.map((a) => a === 1),
  heldBy: codes.map((a) => (typeof a === 'string' && !isStale(a) ? a : undefined)),
  stale: codes.map((a) => (isStale(a) ? a.slice(1) || null : undefined)),
})

/**
 * Stores jobs and pushes each on `wait` (or `delayed`); resolves to when they were created (ms, Redis's
 * clock) and, per job, whether it was added (false: its id was taken; nothing changed for it).
 */
export async function add(client: RedisClient, keys: QueueKeys, jobs: NewJob[]): Promise<AddResult> {
  const [createdOn, codes] = (await evalScript(client, SCRIPT_FILES.add, addKeys(keys, jobs), addArgs(jobs))) as [number, AddCode[]]
  return addResult(createdOn, codes)
}

/**
 * Adds jobs in calls of at most `perCall` jobs, sent in one MULTI: all or none (a Redis that refuses one,
 * out of memory, refuses the transaction). Resolves to each call's result, in order.
 */
export async function addAll(client: RedisClient, keys: QueueKeys, calls: NewJob[][]): Promise<AddResult[]> {
  if (calls.length === 1 && calls[0]) return [await add(client, keys, calls[0])]
  const script = loadScript(SCRIPT_FILES.add)
  // The transaction runs EVAL (it cannot fall back from EVALSHA on NOSCRIPT midway); SCRIPT LOAD first
  // would need a second round trip for nothing.
  const tx = client.multi()
  for (const jobs of calls) {
    const k = addKeys(keys, jobs)
    tx.eval(script.lua, k.length, ...k, ...addArgs(jobs))
  }
  let replies: [Error | null, unknown][] | null
  try {
    replies = await tx.exec()
  } catch (err) {
    // Redis refused the transaction for a command it refused when queued (out of memory): that is the cause.
    throw (err as { previousErrors?: Error[] }).previousErrors?.[0] ?? err
  }
  if (!replies) throw new EchoMQError('ERR_SCRIPT', 'the bulk add transaction was aborted')
  return replies.map(([err, reply]) => {
    if (err) throw err
    const [createdOn, codes] = reply as [number, AddCode[]]
    return addResult(createdOn, codes)
  })
}

// ---- take --------------------------------------------------------------------------------------------

export interface Taken {
  /** The job's fields as taken (the Worker makes its Job of them). */
  job: JobFields
  /** The run's token: `<worker token>:<start number>`, the value of its lease. */
  token: string
}

type TakenReply = [string, string, (string | null)[], string][]

const toTaken = (reply: TakenReply, workerName: string): Taken[] =>
  reply.map(([id, token, fields, startedOn]) => ({ job: jobFromFields(id, fields, startedOn, workerName), token }))

/** A job read into a worker's hand (reserved, not taken until it starts). */
export interface Handed extends Taken {
  /** It waited in `prioritized`: its take drops the score its reservation kept. */
  scored: boolean
}

/** `startedOn` is when they were read, until they start. */
const toHanded = (reply: [string, string, (string | null)[], number][], readAt: number, workerName: string): Handed[] =>
  reply.map(([id, token, fields, scored]) => ({ job: jobFromFields(id, fields, String(readAt), workerName), token, scored: scored === 1 }))

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
const limitArgs = (t: Taker) => [t.limit?.max ?? 0, t.limit?.duration ?? 0]

/** Where reservations and prioritized jobs are kept: what every script that takes or hands back needs. */
const prioritizedKeys = (keys: QueueKeys) => [keys.prioritized, keys.reservedScores]

/** When the earliest delayed job falls due, by Redis's clock: what a busy worker's promoter waits for. */
export interface NextDue {
  /** ms until it is due (0: due now), undefined when no job is delayed. */
  nextDueInMs: number | undefined
  /** Its due time (ms, Redis's clock). */
  nextDueAt: number | undefined
}

const nextDue = (inMs: number, at: number): NextDue => ({
  nextDueInMs: inMs < 0 ? undefined : inMs,
  nextDueAt: at < 0 ? undefined : at,
})

export interface TakeResult extends NextDue {
  taken: Taken[]
  /** Candidates left where they were (reserved, or waiting): the reply was full (TAKE_MAX_BYTES), or the limiter said so. */
  left: string[]
  /** ms to wait before taking again (the limiter, or queue.rateLimit), 0 for none, -1 while the queue is paused. */
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
  const [taken, left, dueIn, dueAt, waitMs, reservedNext] = (await evalScript(
    client,
    SCRIPT_FILES.take,
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
      ...ids,
    ],
  )) as [TakenReply, string[], number, number, number, string[]]
  return { taken: toTaken(taken, taker.workerName), left, ...nextDue(dueIn, dueAt), waitMs, reserved: reservedNext }
}

/** Returns up to `n` reservations past their expiry (a dead worker's) to the front of `wait`; resolves to how many. */
export async function requeueExpired(client: RedisClient, keys: QueueKeys, n: number): Promise<number> {
  return (await evalScript(client, SCRIPT_FILES.requeue, [keys.reserved, keys.wait, keys.marker, ...prioritizedKeys(keys)], [n])) as number
}

/** Returns ids this worker reserved and will not take to the front of `wait`; resolves to how many went back. */
export async function unreserve(client: RedisClient, keys: QueueKeys, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0
  return (await evalScript(
    client,
    SCRIPT_FILES.unreserve,
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
    SCRIPT_FILES.extend,
    [keys.active, keys.stalled, ...leases.map((l) => keys.lock(l.id))],
    [String(leaseMs), k, ...leases.flatMap(({ id, token }) => [id, token])],
  )) as number[]
  const codeOf = new Map(leases.map((l, i) => [l, sorted[i]]))
  const codes = renewals.map((r) => codeOf.get(r) ?? 0)
  const found = codes.map((code) => EXTEND_CODES[code] ?? 'lost')
  const lapsed = renewals.filter((_, i) => found[i] === 'lapsed')
  if (lapsed.length === 0) return found as LeaseStatus[]
  const reclaimed = (await evalScript(
    client,
    SCRIPT_FILES.reclaim,
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

// ---- finish ------------------------------------------------------------------------------------------

/**
 * complete; fail (uses an attempt; a retry waits the job's backoff); fail-final (an UnrecoverableError: to
 * `failed` whatever attempts remain); release (back to wait, served next, no attempt used).
 */
export type FinishAction = 'complete' | 'fail' | 'fail-final' | 'release'

/** A finished set past its retention plus slack: the caller runs `trim` on it. */
export type FinishedSet = 'completed' | 'failed'

/** How one run ended: `lost` when it no longer owned the job (nothing changed for it). */
export interface RunOutcome {
  status: 'ok' | 'lost'
  state: JobState | 'missing'
  /** A finished set that has just grown past its retention by another slack: trim it. */
  trim: FinishedSet | undefined
}

/** One run a finish call ends. */
export interface FinishRun {
  run: Lease
  action: FinishAction
  /** The result (JSON text) to complete with, or the error message to fail with. */
  value: string
  /** The error's stack, for a failure. */
  stack?: string
  /** A fail's retry waits this (ms), not the job's backoff: the worker's settings.backoffStrategy said so. */
  delayMs?: number
  /** The worker's retention (encodeKeep), for a job with none of its own. */
  keep?: string
}

export interface FinishManyResult extends NextDue {
  /** Per run, in the order given. */
  runs: RunOutcome[]
  /** Jobs taken in the same call. */
  taken: Taken[]
  /** Candidates left where they were because the reply was full (TAKE_MAX_BYTES) or the limiter held them. */
  left: string[]
  /** Ids reserved for this worker's next calls, next to be served first. */
  reserved: string[]
  /** Ids at the head of the line after the call (not reserved), next first: candidates for the next one. */
  peeked: string[]
  /** When the runs ended (ms, Redis's clock). */
  finishedOn: number
  /** ms to wait before taking again (the limiter, or queue.rateLimit), 0 for none, -1 while paused. */
  waitMs: number
  /** Jobs read into the hand (still reserved: taken only by the call that follows their start). */
  handed: Handed[]
  /** Per start confirmed, in the order given: taken, or lost (its reservation was gone). */
  confirmed: ('taken' | 'lost')[]
}

/** A single run's finish: its outcome with what the call took and set aside. */
export type FinishResult = Omit<FinishManyResult, 'runs'> & RunOutcome

/** What a finish takes in the same call, and what it sets aside for the calls after it. */
export interface TakeNext extends Taker {
  candidates: string[]
  /** The candidates are ids this worker reserved (else ids read from `wait`). */
  reservedCandidates: boolean
  /** Ids to reserve from the tail of `wait` for the next calls, and for how long (ms). */
  reserve: number
  reserveMs: number
  /** Ids to peek at from the tail of `wait`, without reserving them. */
  peek: number
  /** Reserved ids to read into the hand (neither taken nor leased until they start). */
  hand?: string[]
  /** Jobs started from the hand since the last call: taken now, each under the token it was read with. */
  starts?: (Lease & { scored: boolean })[]
}

const NOTHING_NEXT: TakeNext = {
  workerToken: '',
  leaseMs: 1,
  workerName: '',
  candidates: [],
  reservedCandidates: false,
  reserve: 0,
  reserveMs: 1,
  peek: 0,
}

/**
 * Completes, fails or releases runs of one worker, each fenced by its token, in one call (lua/finish-15.lua),
 * and takes the next jobs in the same call.
 */
export async function finishRuns(
  client: RedisClient,
  keys: QueueKeys,
  runs: FinishRun[],
  next: TakeNext = NOTHING_NEXT,
): Promise<FinishManyResult> {
  const k = keys
  const keyList = [
    k.active,
    k.stalled,
    k.wait,
    k.completed,
    k.failed,
    k.marker,
    k.delayed,
    k.meta,
    k.reserved,
    k.events,
    k.listened,
    k.metrics,
    ...prioritizedKeys(keys),
    k.limiter,
  ]
  const args: (string | number)[] = [
    runs.length,
    Math.random(),
    next.workerToken,
    next.leaseMs,
    next.workerName,
    TAKE_MAX_BYTES,
    next.reservedCandidates ? 'r' : 'w',
    next.reserve,
    next.reserveMs,
    next.peek,
    ...limitArgs(next),
    next.hand?.length ?? 0,
    next.starts?.length ?? 0,
  ]
  for (const r of runs) {
    keyList.push(k.job(r.run.id), k.lock(r.run.id), k.logs(r.run.id))
    const overrides = `${r.delayMs === undefined ? '' : `@${r.delayMs}`}${r.keep === undefined ? '' : `#${r.keep}`}`
    args.push(r.run.id, r.run.token, r.action + overrides, r.value, r.stack ?? '')
  }
  const hand = next.hand ?? []
  const starts = next.starts ?? []
  for (const id of next.candidates) keyList.push(k.job(id), k.lock(id))
  for (const id of hand) keyList.push(k.job(id), k.lock(id))
  for (const s of starts) keyList.push(k.job(s.id), k.lock(s.id))
  const tail = [...next.candidates, ...hand, ...starts.flatMap((s) => [s.id, s.token, s.scored ? '1' : '0'])]
  const reply = (await evalScript(client, SCRIPT_FILES.finish, keyList, [...args, ...tail])) as [
    ['ok' | 'lost', JobState | 'missing', FinishedSet | ''][],
    TakenReply,
    string[],
    string[],
    string[],
    number,
    number,
    number,
    number,
    [string, string, (string | null)[], number][],
    number[],
  ]
  const [outcomes, taken, reserved, peeked, left, dueIn, dueAt, finishedOn, waitMs, handed, confirmed] = reply
  return {
    runs: outcomes.map(([status, state, trim]) => ({ status, state, trim: trim === '' ? undefined : trim })),
    taken: toTaken(taken, next.workerName),
    left,
    reserved,
    peeked,
    ...nextDue(dueIn, dueAt),
    finishedOn,
    waitMs,
    handed: toHanded(handed, finishedOn, next.workerName),
    confirmed: confirmed.map((code) => (code === 1 ? 'taken' : 'lost')),
  }
}

/** Completes, fails or releases one run, fenced by its token; may take the next jobs in the same call. */
export async function finish(
  client: RedisClient,
  keys: QueueKeys,
  run: Lease,
  action: FinishAction,
  value: string,
  next: TakeNext = NOTHING_NEXT,
  stack = '',
): Promise<FinishResult> {
  const { runs, ...rest } = await finishRuns(client, keys, [{ run, action, value, stack }], next)
  return { ...rest, ...(runs[0] as RunOutcome) }
}

// ---- sweep: probe, then steps ------------------------------------------------------------------------

export interface ProbeRequest {
  /** Most candidates per list. */
  limit: number
  /** Audit window size; 0 for none. */
  audit: number
  /** Where the audit window starts, as a fraction of the jobs in flight (0..1). */
  auditAt: number
  /** Return the count of failed jobs to claim (read only: the reaper's JobsFailed, see claimFailures). */
  readFailures: boolean
}

export interface Probe {
  /** Redis's clock (ms) when the probe ran. */
  now: number
  counts: SweepCounts
  /**
   * Jobs that entered `failed` and that no live reaper invocation has claimed, an expired claim's included
   * (0 unless readFailures): above 0, claimFailures has something to claim.
   */
  failedNew: number
  /** In-flight ids whose recorded lease deadline has passed, earliest first. */
  expired: string[]
  audit: string[]
  /** Delayed ids that are due. */
  due: string[]
  /** The oldest ids of each finished set when it is past its retention. */
  trim: Record<FinishedSet, string[]>
  /** The id next in line in `wait`. */
  head: string | undefined
  /** Expired reservations (a dead worker's) sent back to `wait`; when PROBE_REQUEUE_MAX, more may be left. */
  unreserved: number
  /** Job schedulers whose next period is due (at most `limit`). */
  dueSchedulers: string[]
}

/** Most expired reservations one probe (and one requeueExpired call) returns to `wait` (see probe-12.lua). */
export const probeRequeueMax = (limit: number): number => Math.min(limit * 10, 1000)

type ProbeReply = [number, number[], number, string[], string[], string[], string[], string[], string | null, number, string[]]

/** A queue's counts and the candidates of the sweep's steps, in one call on the queue's own keys. */
export async function probe(client: RedisClient, keys: QueueKeys, request: ProbeRequest): Promise<Probe> {
  const k = keys
  const [now, c, failedNew, expired, audit, due, trimCompleted, trimFailed, head, unreserved, dueSchedulers] = (await evalScript(
    client,
    SCRIPT_FILES.probe,
    [k.active, k.stalled, k.wait, k.delayed, k.completed, k.failed, k.marker, k.meta, k.reserved, ...prioritizedKeys(k), k.schedulers],
    [request.limit, request.audit, request.auditAt, request.readFailures ? 1 : 0],
  )) as ProbeReply
  const [wait = 0, active = 0, stalled = 0, delayed = 0, completed = 0, failed = 0, prioritized = 0] = c
  return {
    now,
    counts: { wait, active, stalled, delayed, completed, failed, prioritized },
    failedNew,
    expired,
    audit,
    due,
    trim: { completed: trimCompleted, failed: trimFailed },
    head: head ?? undefined,
    unreserved,
    dueSchedulers,
  }
}

export interface SweepStepRequest {
  graceMs: number
  /** `deadline`: candidates in lease-deadline order, a live deadline ends the step; `audit`: any window. */
  mode: 'deadline' | 'audit'
  ids: string[]
  /** In the deadline walk: the next page's size (0: none), and the candidates before this step left in place. */
  page?: { size: number; passed: number }
}

export interface SweepStepResult {
  marked: string[]
  recovered: string[]
  failed: string[]
  /** Candidates still in `active` where they were (marked, or within grace). */
  left: number
  /** A live deadline was reached: no later candidate in the index can be stalled. */
  done: boolean
  /** `failed` is past its retention plus slack. */
  trimFailed: boolean
  /** The walk's next candidates, when a page was asked for and this step neither was short nor reached a live deadline. */
  next: string[]
  /** The lease deadline (ms) of the first job this step recovered in the deadline walk. */
  firstRecoveredDeadline: number | undefined
}

/** One bounded step of the two-phase sweep over the given candidates. */
export async function sweepStep(
  client: RedisClient,
  keys: QueueKeys,
  { graceMs, mode, ids, page = { size: 0, passed: 0 } }: SweepStepRequest,
): Promise<SweepStepResult> {
  const [marked, recovered, failed, left, done, trim, next, first] = (await evalScript(
    client,
    SCRIPT_FILES.sweepStep,
    [
      keys.active,
      keys.stalled,
      keys.wait,
      keys.failed,
      keys.marker,
      ...eventKeys(keys),
      keys.metrics,
      keys.prioritized,
      ...ids.flatMap((id) => [keys.job(id), keys.lock(id), keys.logs(id)]),
    ],
    [graceMs, mode, page.size, page.passed, ...ids],
  )) as [string[], string[], string[], number, number, number, string[], string | null]
  return {
    marked,
    recovered,
    failed,
    left,
    done: done === 1,
    trimFailed: trim === 1,
    next,
    firstRecoveredDeadline: first === null ? undefined : Number(first),
  }
}

export interface Promoted extends NextDue {
  promoted: string[]
}

/**
 * Moves the due jobs among `ids` (the earliest in `delayed`) to `wait`. `rearm` leaves the next due
 * time in the marker for an idle worker (for a caller that does not set a timer itself).
 */
export async function promote(client: RedisClient, keys: QueueKeys, ids: string[], rearm: boolean): Promise<Promoted> {
  const [promoted, inMs, at] = (await evalScript(
    client,
    SCRIPT_FILES.promote,
    [keys.delayed, keys.wait, keys.marker, ...eventKeys(keys), keys.prioritized, ...ids.map((id) => keys.job(id))],
    [rearm ? 1 : 0, ...ids],
  )) as [string[], number, number]
  return { promoted, ...nextDue(inMs, at) }
}

/**
 * Moves one delayed job to `wait` now, due or not (an operator's "run it now"); resolves to `promoted`, or
 * the state of a job that is not delayed (`missing`: no such job), which is left as it is.
 */
export async function promoteJob(client: RedisClient, keys: QueueKeys, id: string): Promise<'promoted' | JobState | 'missing'> {
  const [status, state] = (await evalScript(
    client,
    SCRIPT_FILES.promoteJob,
    [keys.job(id), keys.delayed, keys.wait, keys.marker, ...eventKeys(keys), keys.prioritized],
    [id],
  )) as ['ok'] | ['not-delayed', JobState | 'missing']
  return status === 'ok' ? 'promoted' : (state ?? 'missing')
}

/** Removes the oldest jobs of a finished set past its retention; `done` when the set is within it. */
export async function trim(
  client: RedisClient,
  keys: QueueKeys,
  set: FinishedSet,
  ids: string[],
): Promise<{ removed: string[]; done: boolean }> {
  const [removed, done] = (await evalScript(
    client,
    SCRIPT_FILES.trim,
    [keys[set], keys.meta, ...jobAndLogs(keys, ids)],
    [set, ...ids],
  )) as [string[], number]
  return { removed, done: done === 1 }
}

/**
 * Sends failed jobs back to `wait` with a fresh attempts budget. `strict`: every id must be failed, else
 * nothing changes and the first other id is returned as `notFailed`, with its state. `maxScore`: only
 * jobs that failed no later than this (their score in `failed`) move.
 */
export async function retry(
  client: RedisClient,
  keys: QueueKeys,
  ids: string[],
  strict: boolean,
  maxScore = Number.POSITIVE_INFINITY,
): Promise<{ moved: string[]; notFailed: { id: string; state: JobState | 'missing' } | undefined }> {
  const [status, result, state] = (await evalScript(
    client,
    SCRIPT_FILES.retry,
    [keys.failed, keys.wait, keys.marker, ...eventKeys(keys), keys.prioritized, ...ids.map((id) => keys.job(id))],
    [strict ? 'strict' : 'any', Number.isFinite(maxScore) ? String(maxScore) : '+inf', ...ids],
  )) as ['ok', string[], undefined] | ['not-failed', string, JobState | 'missing']
  return status === 'ok' ? { moved: result, notFailed: undefined } : { moved: [], notFailed: { id: result, state } }
}

/** Removes a job that is not in flight. */
export async function remove(client: RedisClient, keys: QueueKeys, id: string): Promise<'removed' | 'missing' | 'active'> {
  return (await evalScript(
    client,
    SCRIPT_FILES.remove,
    [
      keys.job(id),
      keys.active,
      keys.wait,
      keys.delayed,
      keys.completed,
      keys.failed,
      keys.reserved,
      ...eventKeys(keys),
      keys.logs(id),
      ...prioritizedKeys(keys),
    ],
    [id],
  )) as 'removed' | 'missing' | 'active'
}

/** Holds every worker of the queue back from starting jobs for `ms` (0 lifts it); resolves to when the hold ends. */
export async function rateLimit(client: RedisClient, keys: QueueKeys, ms: number): Promise<number> {
  return (await evalScript(client, SCRIPT_FILES.limit, [keys.meta], [ms])) as number
}

// ---- listening to events -----------------------------------------------------------------------------

/**
 * Marks that QueueEvents `listenerId` listens for `ttlMs` more (0: it leaves). Resolves to whether its
 * mark was missing, first or lost (a Redis restarted empty, the key evicted): events may have gone unwritten.
 */
export async function listen(client: RedisClient, keys: QueueKeys, listenerId: string, ttlMs: number): Promise<boolean> {
  return (await evalScript(client, SCRIPT_FILES.listen, [keys.listened], [listenerId, ttlMs])) === 1
}

// ---- the reaper's count of failed jobs: claim, then settle -------------------------------------------

export interface FailureClaim {
  /** Failed jobs this invocation now holds (0 while another invocation's claim is live). */
  claimed: number
  /** Of those, the jobs of an expired claim (its invocation died before settling it). */
  takenOver: number
}

/**
 * Moves the queue's count of failed jobs into a claim held by `token` for `leaseMs` (claim-1.lua), so no
 * overlapping invocation publishes them too; an expired claim is taken over.
 */
export async function claimFailures(client: RedisClient, keys: QueueKeys, token: string, leaseMs: number): Promise<FailureClaim> {
  const [claimed, takenOver] = (await evalScript(client, SCRIPT_FILES.claim, [keys.meta], [token, leaseMs])) as [number, number]
  return { claimed, takenOver }
}

/**
 * Ends `token`'s claim (settle-1.lua): `published`, the claim goes; otherwise its jobs go back to the count
 * for the next invocation. Resolves to the jobs it held, or undefined when the claim was not `token`'s
 * (taken over after its lease ended).
 */
export async function settleFailures(client: RedisClient, keys: QueueKeys, token: string, published: boolean): Promise<number | undefined> {
  const held = (await evalScript(client, SCRIPT_FILES.settle, [keys.meta], [token, published ? 1 : 0])) as number
  return held < 0 ? undefined : held
}

// ---- pause, progress and logs ------------------------------------------------------------------------

/** Pauses or resumes the queue; resolves to whether its state changed. */
export async function setPaused(client: RedisClient, keys: QueueKeys, paused: boolean): Promise<boolean> {
  const changed = (await evalScript(
    client,
    SCRIPT_FILES.pause,
    [keys.meta, keys.marker, keys.wait, keys.events, keys.listened, keys.prioritized],
    [paused ? 'pause' : 'resume'],
  )) as number
  return changed === 1
}

/** Whether a write on a job went through: `missing` (no such job), `lost` (the run does not own it). */
export type JobWrite = 'ok' | 'missing' | 'lost'

/** Records a job's progress (JSON text); `token`: the run's, fencing a processor's write, or '' for none. */
export async function updateProgress(client: RedisClient, keys: QueueKeys, id: string, token: string, json: string): Promise<JobWrite> {
  return (await evalScript(client, SCRIPT_FILES.progress, [keys.job(id), keys.lock(id), ...eventKeys(keys)], [id, token, json])) as JobWrite
}

/** Appends a log line; resolves to the lines kept, fenced like updateProgress. */
export async function addLog(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  token: string,
  row: string,
): Promise<{ status: JobWrite; count: number }> {
  const [status, count] = (await evalScript(client, SCRIPT_FILES.log, [keys.job(id), keys.lock(id), keys.logs(id)], [token, row])) as [
    JobWrite,
    number,
  ]
  return { status, count }
}

// ---- clean, drain, obliterate ------------------------------------------------------------------------

/** Removes, of the oldest `ids` of a finished set, those that finished `graceMs` ago or more; `done` at the first younger one. */
export async function clean(
  client: RedisClient,
  keys: QueueKeys,
  set: FinishedSet,
  graceMs: number,
  ids: string[],
): Promise<{ removed: string[]; done: boolean }> {
  const [removed, done] = (await evalScript(
    client,
    SCRIPT_FILES.clean,
    [keys[set], ...eventKeys(keys), ...jobAndLogs(keys, ids)],
    [graceMs, ...ids],
  )) as [string[], number]
  return { removed, done: done === 1 }
}

/** Where drain read the ids it passes. */
export type DrainSource = 'wait' | 'reserved' | 'prioritized' | 'delayed'

/** Removes the given waiting (or delayed) jobs that are still where they were read; resolves to the ids removed. */
export async function drain(client: RedisClient, keys: QueueKeys, source: DrainSource, ids: string[]): Promise<string[]> {
  return (await evalScript(
    client,
    SCRIPT_FILES.drain,
    [keys.wait, keys.reserved, keys.delayed, keys.marker, ...prioritizedKeys(keys), ...jobAndLogs(keys, ids)],
    [source, ...ids],
  )) as string[]
}

/** Where obliterate read the ids it passes. */
export type ObliterateSource = 'wait' | 'reserved' | 'active' | 'prioritized' | 'delayed' | 'completed' | 'failed'

const queueOwnKeys = (k: QueueKeys) => [
  k.wait,
  k.active,
  k.stalled,
  k.delayed,
  k.completed,
  k.failed,
  k.marker,
  k.meta,
  k.reserved,
  k.events,
  k.listened,
  k.metrics,
  k.prioritized,
  k.reservedScores,
  k.limiter,
]

/**
 * One step of obliterating a queue: with `ids` (read from `source`), deletes those jobs; without, deletes
 * the queue's own keys once every set is empty. `active` when jobs are in flight and `force` is off.
 */
export async function obliterate(
  client: RedisClient,
  keys: QueueKeys,
  force: boolean,
  step: { source: ObliterateSource; ids: string[] } | undefined,
): Promise<{ status: 'active' | 'ok' | 'done' | 'more'; count: number }> {
  const ids = step?.ids ?? []
  const [status, count] = (await evalScript(
    client,
    SCRIPT_FILES.obliterate,
    [...queueOwnKeys(keys), ...ids.flatMap((id) => [keys.job(id), keys.lock(id), keys.logs(id)])],
    [step ? 'jobs' : 'keys', force ? '1' : '0', step?.source ?? '', ...ids],
  )) as ['active' | 'ok' | 'done' | 'more', number]
  // The workers' sweep throttle (stalled-check, a plain key with a PX) goes with the queue's keys.
  if (status === 'done') await client.del(keys.stalledCheck)
  return { status, count }
}

// ---- job schedulers ----------------------------------------------------------------------------------

/** A job scheduler's iteration id: deterministic per scheduler and due time, so no two producers make one twice. */
export const iterationId = (schedulerId: string, due: number): string => `repeat:${schedulerId}:${due}`

/** What an upsert or a removal read of a scheduler, which the script checks is still so. */
export interface SchedulerRead {
  /** Its next period (ms). */
  next: number
  /** Its newest run's due time (ms). */
  last: number
}

export interface ScheduleRequest {
  id: string
  /** The scheduler as read before (undefined: it did not exist). */
  read: SchedulerRead | undefined
  firstDue: number
  /** The period after the first, used when the first is due at once; undefined for none. */
  secondDue: number | undefined
  /** Keep the newest run (the timing is unchanged). */
  keep: boolean
  /** The scheduler hash's fields, name and value in turn. */
  fields: string[]
}

/** Creates or changes a job scheduler and its first run; 'retry' when another call moved it meanwhile. */
export async function schedule(
  client: RedisClient,
  keys: QueueKeys,
  r: ScheduleRequest,
): Promise<{ firstId: string; now: number } | 'retry'> {
  const newestId = r.read === undefined ? '' : iterationId(r.id, r.read.last)
  const firstId = iterationId(r.id, r.firstDue)
  const reply = (await evalScript(
    client,
    SCRIPT_FILES.schedule,
    [
      keys.schedulers,
      keys.scheduler(r.id),
      keys.delayed,
      keys.wait,
      keys.marker,
      ...eventKeys(keys),
      keys.prioritized,
      keys.job(newestId || firstId),
      keys.logs(newestId || firstId),
      keys.job(firstId),
      keys.reserved,
      keys.reservedScores,
    ],
    [
      r.id,
      r.read === undefined ? '' : String(r.read.next),
      r.read === undefined ? '' : String(r.read.last),
      newestId,
      r.firstDue,
      firstId,
      r.secondDue ?? -1,
      r.keep ? 'keep' : '',
      ...r.fields,
    ],
  )) as ['retry'] | ['ok', string, number]
  return reply[0] === 'retry' ? 'retry' : { firstId: reply[1], now: reply[2] }
}

/**
 * Most runs one iterate-11.lua call makes: each is a key and two arguments (170 arguments in all) and
 * costs Redis about what adding one job does, so a call stays a fraction of a millisecond.
 */
export const ITERATE_MAX_RUNS = 50

export interface IterateRequest extends SchedulerRead {
  schedulerId: string
  /** `due`: its next period is due; `early`: its pending run goes into line now; `take`: a worker started one of its runs. */
  mode: 'due' | 'early' | 'take'
  /** Due times of the runs to make into line (at most ITERATE_MAX_RUNS, due by Redis's clock), oldest first. */
  runs: number[]
  /** The period after them; undefined for none (the schedule ends). */
  after: number | undefined
}

export interface Iterated {
  /** The scheduler moved meanwhile: nothing changed. */
  retry: boolean
  /** The scheduler is gone: nothing is left to make. */
  ended: boolean
  /** Runs moved from `delayed` into line: its pending run (and any other due run found there). */
  promoted: string[]
  /** Runs made straight into line. */
  made: string[]
  /** The run made in `delayed` (mode `take`). */
  madeDelayed: string | undefined
}

/** Advances a job scheduler (see iterate-11.lua) while it is as read. */
export async function iterate(client: RedisClient, keys: QueueKeys, r: IterateRequest): Promise<Iterated> {
  if (r.runs.length > ITERATE_MAX_RUNS) throw new EchoMQError('ERR_SCRIPT', `iterate makes at most ${ITERATE_MAX_RUNS} runs a call`)
  const sid = r.schedulerId
  const pendingId = iterationId(sid, r.next)
  const afterId = r.after === undefined ? '' : iterationId(sid, r.after)
  const reply = (await evalScript(
    client,
    SCRIPT_FILES.iterate,
    [
      keys.schedulers,
      keys.scheduler(sid),
      keys.delayed,
      keys.wait,
      keys.marker,
      ...eventKeys(keys),
      keys.prioritized,
      keys.job(pendingId),
      keys.job(afterId || pendingId),
      ...r.runs.map((due) => keys.job(iterationId(sid, due))),
    ],
    [
      sid,
      String(r.next),
      String(r.last),
      r.mode,
      r.after ?? -1,
      pendingId,
      afterId,
      ...r.runs.flatMap((due) => [iterationId(sid, due), String(due)]),
    ],
  )) as ['retry'] | ['ok' | 'ended', string[], string[], string | null]
  if (reply[0] === 'retry') return { retry: true, ended: false, promoted: [], made: [], madeDelayed: undefined }
  const [status, promoted, made, madeDelayed] = reply
  return { retry: false, ended: status === 'ended', promoted, made, madeDelayed: madeDelayed ?? undefined }
}

/** Removes a job scheduler and its newest run if not started (see unschedule-12.lua); 'retry' when it moved meanwhile. */
export async function unschedule(
  client: RedisClient,
  keys: QueueKeys,
  schedulerId: string,
  read: SchedulerRead,
): Promise<boolean | 'retry'> {
  const newestId = iterationId(schedulerId, read.last)
  const reply = (await evalScript(
    client,
    SCRIPT_FILES.unschedule,
    [
      keys.schedulers,
      keys.scheduler(schedulerId),
      keys.job(newestId),
      keys.logs(newestId),
      keys.delayed,
      keys.wait,
      keys.prioritized,
      ...eventKeys(keys),
      keys.reserved,
      keys.reservedScores,
    ],
    [schedulerId, String(read.next), String(read.last), newestId],
  )) as number | 'retry'
  return reply === 'retry' ? 'retry' : reply === 1
}

// ---- changing a job (lib/job-changes.ts) ---------------------------------------------------------------

/** Replaces a job's data (JSON text); "missing" when there is no such job. */
export async function updateData(client: RedisClient, keys: QueueKeys, id: string, data: string): Promise<'ok' | 'missing'> {
  return (await evalScript(client, SCRIPT_FILES.updateData, [keys.job(id)], [data])) as 'ok' | 'missing'
}

/** Gives a job a new priority, filing it again when it waits; resolves to its state, or "missing". */
export async function changePriority(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  priority: number,
  lifo: boolean,
): Promise<{ status: 'ok' | 'missing'; state?: JobState }> {
  const [status, state] = (await evalScript(
    client,
    SCRIPT_FILES.changePriority,
    [keys.job(id), keys.wait, keys.prioritized, keys.marker, keys.meta],
    [id, priority, lifo ? '1' : ''],
  )) as ['ok' | 'missing', JobState | undefined]
  return state === undefined ? { status } : { status, state }
}

/** What moveToDelayed found: moved (due at `due`, ms), or why it changed nothing. */
export type MoveToDelayedOutcome =
  | { status: 'ok'; due: number }
  | { status: 'missing' }
  | { status: 'lost' }
  | { status: 'not-active'; state: JobState | 'missing' }

/** Moves a job in flight to `delayed` until `timestamp` (ms), fenced by `token` ("" for any run). */
export async function moveToDelayed(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  token: string,
  timestamp: number,
): Promise<MoveToDelayedOutcome> {
  const reply = (await evalScript(
    client,
    SCRIPT_FILES.moveToDelayed,
    [keys.job(id), keys.lock(id), keys.active, keys.stalled, keys.delayed, keys.marker, ...eventKeys(keys)],
    [id, token, timestamp],
  )) as [string, (string | number)?]
  if (reply[0] === 'ok') return { status: 'ok', due: Number(reply[1]) }
  if (reply[0] === 'not-active') return { status: 'not-active', state: reply[1] as JobState | 'missing' }
  return reply[0] === 'lost' ? { status: 'lost' } : { status: 'missing' }
}

/** Extends a run's lease to `ms` from now; resolves to 1 when `token` held it, else 0 (BullMQ's reply). */
export async function extendLock(client: RedisClient, keys: QueueKeys, id: string, token: string, ms: number): Promise<number> {
  return (await evalScript(client, SCRIPT_FILES.extendLock, [keys.lock(id), keys.active, keys.stalled], [id, token, ms])) as number
}

/** Releases deduplication id `deduplicationId` if job `id` holds it; resolves to 1 when it did, else 0. */
export async function unhold(client: RedisClient, keys: QueueKeys, deduplicationId: string, id: string): Promise<number> {
  return (await evalScript(client, SCRIPT_FILES.unhold, [keys.meta, keys.deduplication(deduplicationId)], [deduplicationId, id])) as number
}

// ---- worker functions (echomq/lambda) -------------------------------------------------------------------

/** A worker-function invocation enters (or renews) its lease, or leaves; resolves to the live count. */
export async function invocation(
  client: RedisClient,
  keys: QueueKeys,
  op: 'enter' | 'leave',
  id: string,
  leaseMs: number,
): Promise<number> {
  return (await evalScript(client, SCRIPT_FILES.invocation, [keys.invocations], [op, id, leaseMs])) as number
}

/** Jobs ready to run (waiting, prioritized, delayed and due; none while paused) and live worker-function invocations. */
export async function backlog(client: RedisClient, keys: QueueKeys): Promise<{ ready: number; live: number }> {
  const [ready, live] = (await evalScript(
    client,
    SCRIPT_FILES.backlog,
    [keys.wait, keys.prioritized, keys.delayed, keys.meta, keys.invocations],
    [],
  )) as [number, number]
  return { ready, live }
}
