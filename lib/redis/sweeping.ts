/**
 * The sweep: probe-15.lua reads a queue's counts and candidates, sweep-11.lua recovers stalled runs (its step:
 * sweep-step.ts), promote and trim move due and old jobs, and the reaper's count of failed jobs is claimed then settled.
 * Each function owns its script's KEYS and ARGV order and turns the reply into named results.
 */

import type { JobState, SweepCounts } from '../job.js'
import type { RedisClient } from './connection.js'
import type { FinishedSet } from './finishing.js'
import { flowKeys, type QueueKeys } from './keys.js'
import { evalScript, eventKeys, type NextDue, nextDue, prioritizedKeys } from './script-runner.js'

/** The scripts this module runs (its part of SCRIPT_FILES in commands.ts). */
export const SWEEP_SCRIPTS = {
  probe: 'probe-15.lua',
  claim: 'claim-1.lua',
  settle: 'settle-1.lua',
  sweepStep: 'sweep-11.lua',
  promote: 'promote-7.lua',
  promoteJob: 'promoteJob-8.lua',
  trim: 'trim-2.lua',
} as const

/** How long a producer may take to write a flow (ms) when the caller does not say. */
const ADDING_GRACE_MS = 15_000

export interface ProbeRequest {
  /** Most candidates per list. */
  limit: number
  /** Audit window size; 0 for none. */
  audit: number
  /** Where the audit window starts, as a fraction of the jobs in flight (0..1). */
  auditAt: number
  /** Return the count of failed jobs to claim (read only: the reaper's JobsFailed, see claimFailures). */
  readFailures: boolean
  /** Also read the backlog of worker functions (the reaper, for a queue in WORKER_FUNCTIONS). */
  readBacklog?: boolean
  /** The id next in line at the caller's last probe: if it still is, the probe reads when it joined the line. */
  knownHead?: string | undefined
  /** In-flight ids whose leases the probe reads (the last probe's audit window): one alive needs no audit. */
  knownInFlight?: readonly string[] | undefined
  /** How long a producer may take to write a flow (ms): parents it left unfinished longer are returned. */
  addingGraceMs?: number
}

/** What scales a queue's worker functions: jobs ready to run (none while paused) and invocations alive. */
export interface Backlog {
  ready: number
  live: number
  /** The queue is paused (so nothing is ready, whatever waits). */
  paused?: boolean
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
  /** The audit window less the jobs whose lease the probe saw (knownInFlight). */
  audit: string[]
  /** The whole audit window (the caller's knownInFlight next time). */
  auditWindow: string[]
  /** Delayed ids that are due. */
  due: string[]
  /** The oldest ids of each finished set when it is past its retention. */
  trim: Record<FinishedSet, string[]>
  /** The id next in line in `wait`. */
  head: string | undefined
  /** When `head` joined the line (ms), read by the probe when it is the request's `knownHead`. */
  headSince?: number
  /** Expired reservations (a dead worker's) sent back to `wait`; when PROBE_REQUEUE_MAX, more may be left. */
  unreserved: number
  /** Job schedulers whose next period is due (at most `limit`). */
  dueSchedulers: string[]
  /** With readBacklog: the backlog after the reservations this probe returned. */
  backlog?: Backlog
  /** Flow hand-offs not yet delivered (about `limit`): id -> entry (lib/flows/handoffs.ts). */
  handoffs: [string, string][]
  /** Parents whose producer stopped before writing all their children (lib/flows/adding.ts). */
  stoppedAdding: string[]
}

/** Most expired reservations one probe (and one requeueExpired call) returns to `wait` (see probe-15.lua). */
export const probeRequeueMax = (limit: number): number => Math.min(limit * 10, 1000)

type Ids = string[]
/** probe-15.lua's reply, in its order (its header names each). */
type ProbeReply = [
  number,
  number[],
  number,
  Ids,
  Ids,
  Ids,
  Ids,
  Ids,
  string | null,
  number,
  Ids,
  [number, number, number] | null,
  string | null,
  Ids,
  Ids,
  Ids,
]

/** A queue's counts and the candidates of the sweep's steps, in one call on the queue's own keys. */
export async function probe(client: RedisClient, keys: QueueKeys, request: ProbeRequest): Promise<Probe> {
  const k = keys
  const known = request.knownHead
  const inFlight = request.knownInFlight ?? []
  const reply = (await evalScript(
    client,
    SWEEP_SCRIPTS.probe,
    [
      k.active,
      k.stalled,
      k.wait,
      k.delayed,
      k.completed,
      k.failed,
      k.marker,
      k.meta,
      k.reserved,
      ...prioritizedKeys(k),
      k.schedulers,
      k.invocations,
      k.handoffs,
      k.adding,
      ...inFlight.map((id) => k.lock(id)),
      ...(known === undefined ? [] : [k.job(known)]),
    ],
    [
      request.limit,
      request.audit,
      request.auditAt,
      request.readFailures ? 1 : 0,
      request.readBacklog ? 1 : 0,
      known ?? '',
      request.addingGraceMs ?? ADDING_GRACE_MS,
      inFlight.length,
      ...inFlight,
    ],
  )) as ProbeReply
  const [
    now,
    c,
    failedNew,
    expired,
    audit,
    due,
    trimCompleted,
    trimFailed,
    head,
    unreserved,
    dueSchedulers,
    backlog,
    since,
    window,
    handoffs,
    stoppedAdding,
  ] = reply
  const headSince = since === null ? Number.NaN : Number(since)
  const [wait = 0, active = 0, stalled = 0, delayed = 0, completed = 0, failed = 0, prioritized = 0] = c
  return {
    now,
    counts: { wait, active, stalled, delayed, completed, failed, prioritized },
    failedNew,
    expired,
    audit,
    auditWindow: window,
    due,
    trim: { completed: trimCompleted, failed: trimFailed },
    head: head ?? undefined,
    unreserved,
    dueSchedulers,
    ...(backlog ? { backlog: { ready: backlog[0], live: backlog[1], paused: backlog[2] === 1 } } : {}),
    ...(Number.isFinite(headSince) && headSince > 0 ? { headSince } : {}),
    handoffs: pairs(handoffs),
    stoppedAdding,
  }
}

/** A flat [id, entry, id, entry...] reply as pairs. */
export function pairs(flat: string[]): [string, string][] {
  const out: [string, string][] = []
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i] as string, flat[i + 1] as string])
  return out
}

export interface Promoted extends NextDue {
  /** How many jobs moved (the ids are not sent back: no caller needs them). */
  promoted: number
}

/**
 * Moves the due jobs among `ids` (the earliest in `delayed`) to `wait`. `rearm` leaves the next due
 * time in the marker for an idle worker (for a caller that does not set a timer itself).
 */
export async function promote(client: RedisClient, keys: QueueKeys, ids: string[], rearm: boolean): Promise<Promoted> {
  const [promoted, inMs, at] = (await evalScript(
    client,
    SWEEP_SCRIPTS.promote,
    // The ids are in their keys (<prefix>:{q}:<id>): not sent again.
    [keys.delayed, keys.wait, keys.marker, ...eventKeys(keys), keys.prioritized, ...ids.map((id) => keys.job(id))],
    [rearm ? 1 : 0],
  )) as [number, number, number]
  return { promoted, ...nextDue(inMs, at) }
}

/**
 * Moves one delayed job to `wait` now, due or not (an operator's "run it now"); resolves to `promoted`, or
 * the state of a job that is not delayed (`missing`: no such job), which is left as it is.
 */
export async function promoteJob(client: RedisClient, keys: QueueKeys, id: string): Promise<'promoted' | JobState | 'missing'> {
  const [status, state] = (await evalScript(
    client,
    SWEEP_SCRIPTS.promoteJob,
    [keys.job(id), keys.delayed, keys.wait, keys.marker, ...eventKeys(keys), keys.prioritized],
    [id],
  )) as ['ok'] | ['not-delayed', JobState | 'missing']
  return status === 'ok' ? 'promoted' : (state ?? 'missing')
}

/**
 * Queues (their meta key) this process saw holding flow keys: their trims ask the script to set parents
 * apart ("p"), whose four flow keys then go in a second call. Only a hint: a trim sent without "p" on a
 * queue that has flow keys removes nothing and asks again, so a wrong guess costs a call, never a parent's
 * keys; one sent "p" on a queue whose parents all went checks no job and says so, and the queue leaves.
 */
const queuesWithFlows = new Set<string>()

/** `needsFlows`: 1 the call needs "p" (nothing was removed), -1 it was sent "p" and the queue has no parents. */
type TrimReply = [removed: number, done: number, near: number, needsFlows: -1 | 0 | 1, parents: string[]]

/** Removes the oldest jobs of a finished set past its retention: how many; `done` when the set is within it. */
export async function trim(
  client: RedisClient,
  keys: QueueKeys,
  set: FinishedSet,
  ids: string[],
): Promise<{ removed: number; done: boolean; near: boolean }> {
  const withFlows = queuesWithFlows.has(keys.meta)
  const call = (mode: '' | 'p' | 'f', some: string[]) => {
    const perJob =
      mode === 'f' ? (id: string) => [keys.job(id), keys.logs(id), ...flowKeys(keys, id)] : (id: string) => [keys.job(id), keys.logs(id)]
    return evalScript(
      client,
      SWEEP_SCRIPTS.trim,
      [keys[set], keys.meta, ...some.flatMap(perJob)],
      [set, mode, ...some],
    ) as Promise<TrimReply>
  }
  let [removed, done, near, needsFlows, parents] = await call(withFlows ? 'p' : '', ids)
  if (needsFlows === 1 && !withFlows) {
    queuesWithFlows.add(keys.meta)
    return trim(client, keys, set, ids)
  }
  if (needsFlows === -1) queuesWithFlows.delete(keys.meta)
  if (parents.length > 0) {
    const [gone, parentsDone, parentsNear] = await call('f', parents)
    removed += gone
    done = parentsDone
    near = parentsNear
  }
  return { removed, done: done === 1, near: near === 1 }
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
  const [claimed, takenOver] = (await evalScript(client, SWEEP_SCRIPTS.claim, [keys.meta], [token, leaseMs])) as [number, number]
  return { claimed, takenOver }
}

/**
 * Ends `token`'s claim (settle-1.lua): `published`, the claim goes; otherwise its jobs go back to the count
 * for the next invocation. Resolves to the jobs it held, or undefined when the claim was not `token`'s
 * (taken over after its lease ended).
 */
export async function settleFailures(client: RedisClient, keys: QueueKeys, token: string, published: boolean): Promise<number | undefined> {
  const held = (await evalScript(client, SWEEP_SCRIPTS.settle, [keys.meta], [token, published ? 1 : 0])) as number
  return held < 0 ? undefined : held
}
