/**
 * The one module that runs Lua scripts. Each function here owns one script's KEYS and ARGV order and
 * turns its reply into named results; everything else (the Queue, the Worker, the sweep, the command,
 * the benchmarks and the tests) calls these functions. Scripts run with EVALSHA, falling back to EVAL on
 * NOSCRIPT (a restarted or failed-over Redis has an empty script cache; EVAL also re-caches it). Every
 * call passes at least one key, so Redis Cluster routes it to the queue's slot.
 */
import type { RedisClient } from './connection.js'
import { EchoMQError } from './errors.js'
import { type Job, type JobState, jobFromHash } from './job.js'
import type { QueueKeys } from './keys.js'
import { loadScript, type Script } from './scripts.js'

export { loadScript, setScriptWrapper } from './scripts.js'

/** Every script file, by the command that runs it. */
export const SCRIPT_FILES = {
  add: 'add-3.lua',
  take: 'take-3.lua',
  extend: 'extend-2.lua',
  reclaim: 'reclaim-2.lua',
  finish: 'finish-8.lua',
  sweepStep: 'sweep-5.lua',
} as const

async function evalScript(client: RedisClient, file: string, keys: string[], args: (string | number)[]): Promise<unknown> {
  const script: Script = loadScript(file)
  if (keys.length < script.fixedKeys || keys.length === 0) {
    throw new EchoMQError('ERR_SCRIPT', `${script.name} needs at least ${Math.max(1, script.fixedKeys)} keys, got ${keys.length}`)
  }
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args)
  } catch (err) {
    if (err instanceof Error && err.message.startsWith('NOSCRIPT')) return await client.eval(script.lua, keys.length, ...keys, ...args)
    throw err
  }
}

/** Loads every script into Redis's cache, so a first call is an EVALSHA (for benchmarks). */
export async function preloadScripts(client: RedisClient): Promise<void> {
  for (const file of Object.values(SCRIPT_FILES)) await client.script('LOAD', loadScript(file).lua)
}

const jobKeyPairs = (keys: QueueKeys, ids: string[]) => ids.flatMap((id) => [keys.job(id), keys.lock(id)])

// ---- add ---------------------------------------------------------------------------------------------

export interface NewJob {
  id: string
  name: string
  /** JSON text. */
  data: string
  attempts: number
}

/** Stores a job and pushes it on `wait`; 'exists' when the id is taken (nothing changes then). */
export async function add(client: RedisClient, keys: QueueKeys, job: NewJob): Promise<'added' | 'exists'> {
  const reply = await evalScript(
    client,
    SCRIPT_FILES.add,
    [keys.job(job.id), keys.wait, keys.marker],
    [job.id, job.name, job.data, job.attempts],
  )
  return reply === 1 ? 'added' : 'exists'
}

// ---- take --------------------------------------------------------------------------------------------

export interface Taken {
  job: Job
  /** The run's token: `<worker token>:<start number>`, the value of its lease. */
  token: string
}

type TakenReply = [string, string, string[]][]

const toTaken = (reply: TakenReply): Taken[] => reply.map(([id, token, hash]) => ({ job: jobFromHash(id, hash), token }))

/** Up to `n` ids from the tail of `wait`, the next to be served first: the candidates for `take`. */
export async function readCandidates(client: RedisClient, keys: QueueKeys, n: number): Promise<string[]> {
  return (await client.lrange(keys.wait, -n, -1)).reverse()
}

export interface TakeRequest {
  /** The lease value is `<workerToken>:<start number>`. */
  workerToken: string
  leaseMs: number
  /** Candidate ids (from readCandidates); one another worker took meanwhile is skipped. */
  ids: string[]
}

/** Takes the candidates still in `wait`, each with a lease of `leaseMs`. */
export async function take(client: RedisClient, keys: QueueKeys, { workerToken, leaseMs, ids }: TakeRequest): Promise<Taken[]> {
  const reply = await evalScript(
    client,
    SCRIPT_FILES.take,
    [keys.wait, keys.active, keys.marker, ...jobKeyPairs(keys, ids)],
    [workerToken, leaseMs, ...ids],
  )
  return toTaken(reply as TakenReply)
}

// ---- extend (heartbeat), with reclaim ------------------------------------------------------------------

export interface Lease {
  id: string
  token: string
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
export async function extend(client: RedisClient, keys: QueueKeys, leaseMs: number, leases: Lease[]): Promise<LeaseStatus[]> {
  const codes = (await evalScript(
    client,
    SCRIPT_FILES.extend,
    [keys.active, keys.stalled, ...leases.map((l) => keys.lock(l.id))],
    [leaseMs, ...leases.flatMap(({ id, token }) => [id, token])],
  )) as number[]
  const found = codes.map((code) => EXTEND_CODES[code] ?? 'lost')
  const lapsed = leases.filter((_, i) => found[i] === 'lapsed')
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

/** complete; fail (uses an attempt); release (back to wait, served next, no attempt used). */
export type FinishAction = 'complete' | 'fail' | 'release'

export interface FinishResult {
  /** `lost`: the run no longer owned the job; nothing changed. */
  status: 'ok' | 'lost'
  state: JobState | 'missing'
  /** Jobs taken in the same call. */
  taken: Taken[]
  /** Ids at the tail of `wait` after the call: candidates for the next one. */
  peeked: string[]
}

/** What a finish takes in the same call: candidates read earlier, and how many ids to peek at after. */
export interface TakeNext {
  workerToken: string
  leaseMs: number
  candidates: string[]
  peek: number
}

const NOTHING_NEXT: TakeNext = { workerToken: '', leaseMs: 1, candidates: [], peek: 0 }

/** Completes, fails or releases a run, fenced by its token; may take the next jobs in the same call. */
export async function finish(
  client: RedisClient,
  keys: QueueKeys,
  run: Lease,
  action: FinishAction,
  value: string,
  next: TakeNext = NOTHING_NEXT,
): Promise<FinishResult> {
  const k = keys
  const reply = (await evalScript(
    client,
    SCRIPT_FILES.finish,
    [k.job(run.id), k.lock(run.id), k.active, k.stalled, k.wait, k.completed, k.failed, k.marker, ...jobKeyPairs(keys, next.candidates)],
    [run.id, run.token, action, value, next.workerToken, next.leaseMs, next.peek, ...next.candidates],
  )) as ['ok' | 'lost', JobState | 'missing', TakenReply, string[]]
  const [status, state, taken, peeked] = reply
  return { status, state, taken: toTaken(taken), peeked: peeked.reverse() }
}

// ---- sweep step ----------------------------------------------------------------------------------------

export interface SweepStepRequest {
  graceMs: number
  /** `deadline`: candidates in lease-deadline order, a live deadline ends the step; `audit`: any window. */
  mode: 'deadline' | 'audit'
  ids: string[]
}

export interface SweepStepResult {
  marked: string[]
  recovered: string[]
  failed: string[]
  /** Candidates still in `active` after the step (marked, or within grace). */
  left: number
  /** A live deadline was reached: no later candidate in the index can be stalled. */
  done: boolean
}

/** One bounded step of the two-phase sweep over the given candidates. */
export async function sweepStep(client: RedisClient, keys: QueueKeys, { graceMs, mode, ids }: SweepStepRequest): Promise<SweepStepResult> {
  const [marked, recovered, failed, left, done] = (await evalScript(
    client,
    SCRIPT_FILES.sweepStep,
    [keys.active, keys.stalled, keys.wait, keys.failed, keys.marker, ...jobKeyPairs(keys, ids)],
    [graceMs, mode, ...ids],
  )) as [string[], string[], string[], number, number]
  return { marked, recovered, failed, left, done: done === 1 }
}
