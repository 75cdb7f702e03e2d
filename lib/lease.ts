/**
 * The lease scripts as functions: take jobs with a lease, renew leases, and finish a run (optionally
 * taking the next jobs in the same call). Each builds the keys its script needs; the Worker, the
 * benchmarks and the tests call these rather than the scripts.
 */
import { jobFromHash, type Job, type JobState } from './job.js'
import type { QueueKeys } from './keys.js'
import type { Lease } from './lock-manager.js'
import { runScript, scripts, type RedisClient } from './scripts.js'

export interface Taken {
  job: Job
  token: string
}

type TakenReply = [string, string, string[]][]

const toTaken = (reply: TakenReply): Taken[] => reply.map(([id, token, hash]) => ({ job: jobFromHash(id, hash), token }))
const jobKeyPairs = (keys: QueueKeys, ids: string[]) => ids.flatMap((id) => [keys.job(id), keys.lock(id)])

/** Up to `n` ids from the tail of `wait`, the next to be served first. */
export async function readCandidates(client: RedisClient, keys: QueueKeys, n: number): Promise<string[]> {
  return (await client.lrange(keys.wait, -n, -1)).reverse()
}

/** Takes the candidates still in `wait`, each with a lease of `leaseMs` held by `<workerToken>:<start>`. */
export async function takeJobs(client: RedisClient, keys: QueueKeys, workerToken: string, leaseMs: number, ids: string[]): Promise<Taken[]> {
  const reply = await runScript(client, scripts.take(), [keys.wait, keys.active, keys.marker, ...jobKeyPairs(keys, ids)], [workerToken, leaseMs, ...ids])
  return toTaken(reply as TakenReply)
}

/**
 * Renews leases; one code per lease: 1 renewed, 2 lapsed but taken back, 0 lost. Leases that lapsed (a
 * paused worker) need the job's hash to judge, so they go to a second script; normally there are none.
 */
export async function extendLeases(client: RedisClient, keys: QueueKeys, leaseMs: number, leases: Lease[]): Promise<number[]> {
  const codes = (await runScript(client, scripts.extend(), [keys.active, keys.stalled, ...leases.map((l) => keys.lock(l.id))], [leaseMs, ...leases.map((l) => l.token)])) as number[]
  const lapsed = leases.filter((_, i) => codes[i] === 3)
  if (lapsed.length === 0) return codes
  const reclaimed = (await runScript(
    client,
    scripts.reclaim(),
    [keys.active, keys.stalled, ...jobKeyPairs(keys, lapsed.map((l) => l.id))],
    [leaseMs, ...lapsed.flatMap(({ id, token }) => [id, token])],
  )) as number[]
  let next = 0
  return codes.map((code) => (code === 3 ? (reclaimed[next++] ?? 0) : code))
}

export type FinishAction = 'complete' | 'fail' | 'release'

export interface FinishResult {
  status: 'ok' | 'lost'
  state: JobState | 'missing'
  /** Jobs taken in the same call. */
  taken: Taken[]
  /** Ids at the tail of `wait` after the call: candidates for the next one. */
  peeked: string[]
}

export interface TakeNext {
  workerToken: string
  leaseMs: number
  candidates: string[]
  peek: number
}

const NOTHING_NEXT: TakeNext = { workerToken: '', leaseMs: 1, candidates: [], peek: 0 }

/** Completes, fails (one attempt) or releases a run, fenced by its token. */
export async function finishJob(client: RedisClient, keys: QueueKeys, run: Lease, action: FinishAction, value: string, next: TakeNext = NOTHING_NEXT): Promise<FinishResult> {
  const k = keys
  const reply = (await runScript(
    client,
    scripts.finish(),
    [k.job(run.id), k.lock(run.id), k.active, k.stalled, k.wait, k.completed, k.failed, k.marker, ...jobKeyPairs(keys, next.candidates)],
    [run.id, run.token, action, value, next.workerToken, next.leaseMs, next.peek, ...next.candidates],
  )) as ['ok' | 'lost', JobState | 'missing', TakenReply, string[]]
  const [status, state, taken, peeked] = reply
  return { status, state, taken: toTaken(taken), peeked: peeked.reverse() }
}
