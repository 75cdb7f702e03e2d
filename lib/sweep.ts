/**
 * sweep(): one pass of the queue's maintenance, returning what it did. Its heart is the two-phase
 * stalled-job sweep: a job in `active` whose lease has expired is marked on the first pass and recovered
 * on a later pass that still finds it stalled with a mark at least `graceMs` old: attemptsMade + 1, then
 * back to `wait` (served next) or to `failed` when no attempts are left. Each step is one script call, so
 * any number of overlapping sweeps recover a job exactly once.
 *
 * A pass opens with one call on the queue's own keys (lua/probe-15.lua): the counts, and the candidates of
 * the steps below. For an idle queue that is the only call. Then, each in bounded script calls over ids
 * the probe or a read found, re-checked by the script:
 *   - the deadline walk over leases whose recorded deadline has passed (a live lease with a stale
 *     deadline, which heartbeats refresh only every other tick, is re-scored and skipped): its cost grows
 *     with the number of expired leases, not with the number of healthy jobs in flight;
 *   - an audit of `audit` in-flight jobs picked at random, whatever their deadline, so a lease key
 *     deleted by hand or evicted (run Redis with `maxmemory-policy noeviction`) is found before its
 *     recorded deadline;
 *   - expired reservations (a dead worker's next jobs) go back to the front of `wait`;
 *   - delayed jobs that are due move to `wait`; job schedulers whose next period is due make every period
 *     due since, up to the catch-up limit (schedulers/iterations.ts), so a schedule with no worker keeps
 *     producing at its own pace, however far apart the sweeps;
 *   - `completed` and `failed` are trimmed exactly to their retention;
 *   - a flow's children whose parents were not told of their outcome (a worker died between the two steps,
 *     lib/flows/handoffs.ts) are told now: a page of the outbox per pass; a flow's parents whose producer
 *     stopped before writing all their children, `graceMs` ago, fail for the missing ones (lib/flows/adding.ts).
 *
 * Options: prefix ('emq'), graceMs (15000, the reaper's too), limit (100 candidates per call), audit (32
 * jobs per pass; 0 turns the audit off).
 */
import { randomInt } from 'node:crypto'
import { redisError } from './errors.js'
import { repairStoppedAdds } from './flows/adding.js'
import { deliverHandoffs } from './flows/handoffs.js'
import type { SweepCounts } from './job.js'
import { DEFAULTS, type SweepSettings, sweepSettings, validateQueueName } from './options.js'
import { type Backlog, type FinishedSet, type Probe, probe, probeRequeueMax, requeueExpired, sweepStep } from './redis/commands.js'
import { closeConnection, failFast, lastConnectionError, openConnection, type RedisClient } from './redis/connection.js'
import { type QueueKeys, queueKeys } from './redis/keys.js'
import { dueDelayed, dueSchedulers, waitingSince } from './redis/queries.js'
import { trimFinished } from './retention.js'
import { promoteDue } from './schedulers/iterations.js'

export interface SweepResult {
  marked: string[]
  recovered: string[]
  failed: string[]
}

export interface SweepOptions {
  prefix?: string
  graceMs?: number
  limit?: number
  audit?: number
}

/** What a pass did and saw, for the reaper's metrics. */
export interface QueuePass extends SweepResult {
  /** Jobs put in line: delayed jobs that fell due, and job schedulers' runs made straight into line. */
  promoted: number
  trimmed: number
  counts: SweepCounts
  /**
   * Jobs that entered `failed` that no live reaper invocation has claimed (lib/reaper/failures.ts), as the
   * count stands after this pass: the probe's reading plus the jobs this pass failed (0 unless asked for).
   */
  failedNew: number
  /**
   * The jobs this pass failed, as they were (for a worker's `failed` event: its retention, or the pass's trim,
   * may have removed one), those that fit a step's reply (sweep-11.lua); absent for none.
   */
  failedJobs?: Map<string, Record<string, string>>
  /**
   * How long the oldest job in `wait` has waited (ms), when `wait` is not empty: the job next in line
   * when the pass began, or a job this pass recovered, whose wait began when its lease expired.
   */
  oldestWaitMs: number | undefined
  /**
   * With `readBacklog`: what scales the queue's worker functions once this pass is done (the probe's
   * reading, plus the jobs this pass put in line: recovered, and schedulers' runs made).
   */
  backlog?: Backlog
  /** The id next in line when the pass began (a caller passes it back as `knownHead` next time). */
  head: string | undefined
  /** The in-flight jobs the probe picked to audit (a caller passes them back as `knownInFlight` next time). */
  auditWindow: string[]
}

/** What a caller of sweepQueue asks of a pass beyond the sweep itself (the reaper). */
export interface PassOptions {
  readFailures?: boolean
  readBacklog?: boolean
  knownHead?: string | undefined
  knownInFlight?: readonly string[] | undefined
}

export async function sweep(connection: unknown, queue: string, options?: SweepOptions): Promise<SweepResult> {
  validateQueueName(queue)
  const settings = sweepSettings(options)
  const conn = openConnection(connection, { redisOptions: failFast(DEFAULTS.redisTimeoutMs) })
  try {
    const { marked, recovered, failed } = await sweepQueue(conn.client, queueKeys(settings.prefix, queue), settings)
    return { marked, recovered, failed }
  } catch (err) {
    throw redisError(queue, 'sweep', err, lastConnectionError(conn.client))
  } finally {
    await closeConnection(conn)
  }
}

/**
 * One pass over one queue (see above). `readFailures`: report the count of jobs that entered `failed` and
 * that no reaper invocation has claimed (the reaper's JobsFailed, which it claims and publishes). The count
 * is only read here, never taken: a library sweep, or a reaper with metrics off, leaves it to the reaper
 * that publishes it. `readBacklog`: report the backlog of worker functions, read by the same probe (the
 * reaper, for a queue in WORKER_FUNCTIONS). `knownHead`: the `head` of this queue's last pass; while that job
 * is still next in line the probe reads its wait too, so a queue whose line does not move costs one call.
 * `knownInFlight`: the `auditWindow` of its last pass; the probe reads those leases and audits only the
 * jobs of its window whose lease it did not see, so a queue whose jobs in flight stay alive costs one call.
 */
export async function sweepQueue(
  client: RedisClient,
  keys: QueueKeys,
  { graceMs, limit, audit }: SweepSettings,
  { readFailures = false, readBacklog = false, knownHead, knownInFlight }: PassOptions = {},
): Promise<QueuePass> {
  const auditAt = randomInt(1_000_000) / 1_000_000
  const request = { limit, audit, auditAt, readFailures, readBacklog, knownHead, knownInFlight }
  const found = await probe(client, keys, { ...request, addingGraceMs: graceMs })
  // A crash of a busy fleet leaves more expired reservations than the probe returns: all go back now.
  const share = probeRequeueMax(limit)
  if (atRest(found, share)) return restingPass(found, readFailures)
  for (let n = found.unreserved; n === share; ) n = await requeueExpired(client, keys, share)
  const result: SweepResult = { marked: [], recovered: [], failed: [] }
  const trims = new Set<FinishedSet>()
  // Flow hand-offs to deliver: those a dead worker left (the probe's page), and those this pass writes.
  const handoffs = new Map<string, string>(found.handoffs)
  const failedJobs = new Map<string, Record<string, string>>()
  // The earliest lease deadline of a job the deadline walk recovers: when its wait for a worker began.
  let earliestRecovered: number | undefined
  const step = async (ids: string[], mode: 'deadline' | 'audit', page = { size: 0, passed: 0 }) => {
    const reply = await sweepStep(client, keys, { graceMs, mode, ids, page })
    // Candidates come in deadline order: the first recovered of the walk waited longest.
    const at = reply.firstRecoveredDeadline
    if (at !== undefined) earliestRecovered = Math.min(at, earliestRecovered ?? at)
    for (const id of reply.marked) if (!result.marked.includes(id)) result.marked.push(id)
    result.recovered.push(...reply.recovered)
    result.failed.push(...reply.failed)
    if (reply.trimFailed) trims.add('failed')
    for (const [id, entry] of reply.handoffs) handoffs.set(id, entry)
    for (const [id, hash] of reply.failedJobs) failedJobs.set(id, hash)
    return reply
  }
  // Each step returns the next page of expired leases; candidates that stay in place (marked, within
  // grace) keep their rank, so the page starts past them.
  let ids = found.expired
  let passed = 0
  while (ids.length > 0) {
    const { left, done, next } = await step(ids, 'deadline', { size: limit, passed })
    if (done || ids.length < limit) break
    passed += left
    ids = next
  }
  if (found.audit.length > 0) await step(found.audit, 'audit')
  if (handoffs.size > 0) await deliverHandoffs(client, keys, [...handoffs])
  if (found.stoppedAdding.length > 0) await repairStoppedAdds(client, keys, found.stoppedAdding)
  // Jobs this pass failed may take `failed` past its limits (the probe looked before): trim it exactly too.
  if (result.failed.length > 0) trims.add('failed')
  const { promoted, made } = await promoteAll(client, keys, found, limit)
  const trimmed = { completed: 0, failed: 0 }
  for (const set of ['completed', 'failed'] as const) {
    const first = found.trim[set]
    if (first.length > 0 || trims.has(set)) trimmed[set] = await trimFinished(client, keys, set, first.length > 0 ? first : undefined)
  }
  const counts = movedCounts(found.counts, result, promoted + made, promoted, trimmed)
  const waited = await waitingFor(client, keys, found)
  const recoveredWaited = earliestRecovered === undefined ? undefined : Math.max(0, found.now - earliestRecovered)
  const oldestWaitMs =
    waited === undefined || recoveredWaited === undefined ? (waited ?? recoveredWaited) : Math.max(waited, recoveredWaited)
  const failedNew = readFailures ? found.failedNew + result.failed.length : 0
  const b = found.backlog
  const backlog = b && { ...b, ready: b.paused ? 0 : b.ready + result.recovered.length + made }
  return {
    ...result,
    promoted: promoted + made,
    trimmed: trimmed.completed + trimmed.failed,
    counts,
    failedNew,
    oldestWaitMs,
    ...(backlog ? { backlog } : {}),
    head: found.head,
    auditWindow: found.auditWindow,
    ...(failedJobs.size > 0 ? { failedJobs } : {}),
  }
}

/** The probe's counts, moved on by what a pass did: `lined` jobs put in line, `promoted` of them from `delayed`. */
function movedCounts(
  c: SweepCounts,
  result: SweepResult,
  lined: number,
  promoted: number,
  trimmed: { completed: number; failed: number },
): SweepCounts {
  const left = result.recovered.length + result.failed.length
  return {
    wait: c.wait + result.recovered.length + lined,
    // A recovered or promoted job may have joined `prioritized`: the probe's figure, not moved on.
    prioritized: c.prioritized,
    active: c.active - left,
    stalled: Math.max(0, c.stalled + result.marked.length - left),
    delayed: c.delayed - promoted,
    completed: c.completed - trimmed.completed,
    failed: c.failed + result.failed.length - trimmed.failed,
  }
}

/**
 * The probe left nothing to do: no candidate for a step, no reservation beyond its share, no flow hand-off
 * or stopped flow to repair, and the wait of the job next in line (if any) read already. Most queues of a
 * reaper's pass are at rest.
 */
function atRest(found: Probe, share: number): boolean {
  return (
    found.expired.length === 0 &&
    found.audit.length === 0 &&
    found.due.length === 0 &&
    found.dueSchedulers.length === 0 &&
    found.trim.completed.length === 0 &&
    found.trim.failed.length === 0 &&
    found.handoffs.length === 0 &&
    found.stoppedAdding.length === 0 &&
    found.unreserved < share &&
    (found.head === undefined || found.headSince !== undefined)
  )
}

/** The pass of a queue at rest: the probe's reading, as the full pass would report it. */
function restingPass(found: Probe, readFailures: boolean): QueuePass {
  return {
    marked: [],
    recovered: [],
    failed: [],
    promoted: 0,
    trimmed: 0,
    counts: found.counts,
    failedNew: readFailures ? found.failedNew : 0,
    oldestWaitMs: found.headSince === undefined ? undefined : Math.max(0, found.now - found.headSince),
    ...(found.backlog ? { backlog: found.backlog } : {}),
    head: found.head,
    auditWindow: found.auditWindow,
  }
}

/**
 * Moves every delayed job due by the probe's time to `wait`, and catches up every job scheduler whose next
 * period is due; the marker then names the next due time. Resolves to the jobs moved from `delayed` and
 * the schedulers' runs made straight into line.
 */
async function promoteAll(client: RedisClient, keys: QueueKeys, found: Probe, limit: number): Promise<{ promoted: number; made: number }> {
  let ids = found.due
  let sids = found.dueSchedulers
  let promoted = 0
  let made = 0
  while (ids.length > 0 || sids.length > 0) {
    const step = await promoteDue(client, keys, ids, true, sids)
    promoted += step.promoted
    made += step.made.length
    if ((ids.length < limit && sids.length < limit) || step.promoted + step.made.length === 0) break
    ;[ids, sids] = await Promise.all([
      ids.length < limit ? [] : dueDelayed(client, keys, found.now, limit),
      sids.length < limit ? [] : dueSchedulers(client, keys, found.now, limit),
    ])
  }
  return { promoted, made }
}

/**
 * How long the job next in line has waited: the probe's reading when it knew the job, else one read (only
 * when `wait` is not empty).
 */
async function waitingFor(client: RedisClient, keys: QueueKeys, found: Probe): Promise<number | undefined> {
  if (found.head === undefined) return undefined
  const since = found.headSince ?? (await waitingSince(client, keys, found.head))
  return since === undefined ? undefined : Math.max(0, found.now - since)
}
