/**
 * Admin and clean-up: remove, the queue's rate limit, listening, pause, progress and logs, clean, drain and
 * obliterate (retrying.ts: retry).
 * Each function owns its script's KEYS and ARGV order and turns the reply into named results.
 */

import { unhold } from './changing.js'
import type { RedisClient } from './connection.js'
import type { FinishedSet } from './finishing.js'
import { parseIteration } from './iteration-id.js'
import { flowKeys, type QueueKeys } from './keys.js'
import { evalScript, eventKeys, pairs, prioritizedKeys } from './script-runner.js'

/** The scripts this module runs (its part of SCRIPT_FILES in commands.ts). */
export const ADMIN_SCRIPTS = {
  remove: 'remove-22.lua',
  pause: 'pause-6.lua',
  progress: 'progress-5.lua',
  log: 'log-3.lua',
  clean: 'clean-5.lua',
  cleanWaiting: 'cleanWaiting-10.lua',
  drain: 'drain-8.lua',
  obliterate: 'obliterate-18.lua',
  limit: 'limit-1.lua',
  listen: 'listen-1.lua',
} as const

/** What remove-22.lua did: removed, or why not. */
export type RemoveOutcome = 'removed' | 'missing' | 'active' | 'parent' | 'kept' | 'scheduler'

/**
 * Removes a job that is not in flight, with a parent's own keys; a flow's child that had not completed
 * leaves the entry for its parent (`handoff`, lib/flows/handoffs.ts delivers it) unless `tellParent` is false.
 * With `parentCheck`, a parent is left as it is and answered `parent` (its children are read first); with
 * `keepFinished`, a completed or failed job is left as it is and answered `kept`; with `schedulerCheck`, a job
 * scheduler's pending run is left and answered `scheduler`. A job in `active` whose lease lapsed is removed.
 */
export async function remove(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  {
    tellParent = true,
    parentCheck = false,
    keepFinished = false,
    schedulerCheck = false,
  }: { tellParent?: boolean; parentCheck?: boolean; keepFinished?: boolean; schedulerCheck?: boolean } = {},
): Promise<{ outcome: RemoveOutcome; handoff?: string }> {
  const run = schedulerCheck ? parseIteration(id) : undefined
  const [outcome, handoff, deid] = (await evalScript(
    client,
    ADMIN_SCRIPTS.remove,
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
      keys.waitingChildren,
      keys.handoffs,
      keys.dependencies(id),
      keys.processed(id),
      keys.failedChildren(id),
      keys.unsuccessful(id),
      keys.lock(id),
      keys.stalled,
      schedulerOf(keys, id),
    ],
    [id, tellParent ? '1' : '0', parentCheck ? '1' : '0', keepFinished ? '1' : '0', run ? '1' : '0'],
  )) as [RemoveOutcome, string?, string?]
  if (deid) await releaseTtlHolds(client, keys, [id, deid])
  return handoff ? { outcome, handoff } : { outcome }
}

/** Holds every worker of the queue back from starting jobs for `ms` (0 lifts it); resolves to when the hold ends. */
export async function rateLimit(client: RedisClient, keys: QueueKeys, ms: number): Promise<number> {
  return (await evalScript(client, ADMIN_SCRIPTS.limit, [keys.meta], [ms])) as number
}

/** Lifts a hold (limit-1.lua with 0) and deletes the limiters' window: 1 when there was either, else 0. */
export async function removeRateLimit(client: RedisClient, keys: QueueKeys): Promise<number> {
  const held = await client.hexists(keys.meta, 'limitedUntil')
  await rateLimit(client, keys, 0)
  return Math.min(1, held + (await client.del(keys.limiter)))
}

// ---- listening to events -----------------------------------------------------------------------------

/**
 * Marks that QueueEvents `listenerId` listens for `ttlMs` more (0: it leaves). Resolves to whether its
 * mark was missing, first or lost (a Redis restarted empty, the key evicted): events may have gone unwritten.
 */
export async function listen(client: RedisClient, keys: QueueKeys, listenerId: string, ttlMs: number): Promise<boolean> {
  return (await evalScript(client, ADMIN_SCRIPTS.listen, [keys.listened], [listenerId, ttlMs])) === 1
}

// ---- pause, progress and logs ------------------------------------------------------------------------

/** Pauses or resumes the queue; resolves to whether its state changed. */
export async function setPaused(client: RedisClient, keys: QueueKeys, paused: boolean): Promise<boolean> {
  const changed = (await evalScript(
    client,
    ADMIN_SCRIPTS.pause,
    [keys.meta, keys.marker, keys.wait, keys.events, keys.listened, keys.prioritized],
    [paused ? 'pause' : 'resume'],
  )) as number
  return changed === 1
}

/** Whether a write on a job went through: `missing` (no such job), `lost` (the run does not own it). */
export type JobWrite = 'ok' | 'missing' | 'lost'

/** Records a job's progress (JSON text); `token`: the run's, fencing a processor's write, or '' for none. */
export async function updateProgress(client: RedisClient, keys: QueueKeys, id: string, token: string, json: string): Promise<JobWrite> {
  return (await evalScript(
    client,
    ADMIN_SCRIPTS.progress,
    [keys.job(id), keys.lock(id), ...eventKeys(keys)],
    [id, token, json],
  )) as JobWrite
}

/** Appends a log line; resolves to the lines kept, fenced like updateProgress. */
export async function addLog(
  client: RedisClient,
  keys: QueueKeys,
  id: string,
  token: string,
  row: string,
): Promise<{ status: JobWrite; count: number }> {
  const [status, count] = (await evalScript(client, ADMIN_SCRIPTS.log, [keys.job(id), keys.lock(id), keys.logs(id)], [token, row])) as [
    JobWrite,
    number,
  ]
  return { status, count }
}

/** Clears a job's log, or trims it to its newest `keep` lines (BullMQ's clearLogs: one command, not fenced by a run). */
export async function clearLogs(client: RedisClient, keys: QueueKeys, id: string, keep: number): Promise<void> {
  if (keep > 0) await client.ltrim(keys.logs(id), -keep, -1)
  else await client.del(keys.logs(id))
}

// ---- clean, drain, obliterate ------------------------------------------------------------------------

/** A job's flow keys (a parent's children: BullMQ's dependencies, processed, failed, unsuccessful), removed with it. */

/**
 * Removes, of the oldest `ids` of a finished set, those that finished `graceMs` ago or more; `done` at the
 * first younger one. `handoffs`: the outbox entries of the failed flow children among them, to deliver.
 */
export async function clean(
  client: RedisClient,
  keys: QueueKeys,
  set: FinishedSet,
  graceMs: number,
  ids: string[],
): Promise<{ removed: string[]; done: boolean; handoffs: [string, string][] }> {
  const [removed, done, flat] = (await evalScript(
    client,
    ADMIN_SCRIPTS.clean,
    [keys[set], ...eventKeys(keys), keys.handoffs, ...ids.flatMap((id) => [keys.job(id), keys.logs(id), ...flowKeys(keys, id)])],
    [graceMs, ...ids],
  )) as [string[], number, string[]]
  return { removed, done: done === 1, handoffs: pairs(flat) }
}

/** Where a step of clean reads a waiting state's jobs: `reserved` holds a busy worker's (of `wait` or `prioritized`). */
export type CleanSource = 'wait' | 'reserved' | 'prioritized' | 'delayed'

/** Where a step of cleanWaiting left off: the jobs passed over at the source's start, the newest of them, and what to look at next. */
export type CleanPlace = { frontier: number; anchor: string; next: string[] }

/** What one step of cleanWaiting is told: the state it cleans and where it reads it, its bounds, where the step before left off. */
type CleanStep = { source: CleanSource; state: Exclude<CleanSource, 'reserved'>; bound: number; room: number; batch: number; most: number }

/**
 * One step of clean for a waiting state (cleanWaiting-10.lua says how): removes, of `at.next`, the jobs in
 * `state` whose timestamp is `bound` (ms, Redis's clock) or earlier, at most `room`, and reads `batch` ids
 * for the next step, none past the `most`-th job passed over. `handoffs`: the outbox entries of the flow children among them, to deliver.
 */
export async function cleanWaiting(
  client: RedisClient,
  keys: QueueKeys,
  step: CleanStep,
  at: CleanPlace,
): Promise<{ removed: string[]; handoffs: [string, string][]; at: CleanPlace }> {
  const [removed, flat, next, frontier, anchor, held] = (await evalScript(
    client,
    ADMIN_SCRIPTS.cleanWaiting,
    [
      keys.wait,
      keys.reserved,
      keys.reservedScores,
      keys.prioritized,
      keys.delayed,
      ...eventKeys(keys),
      keys.handoffs,
      keys.schedulers,
      ...at.next.flatMap((id) => [keys.job(id), keys.logs(id), ...flowKeys(keys, id), schedulerOf(keys, id)]),
    ],
    [step.source, step.state, step.bound, step.room, step.batch, step.most, at.frontier, at.anchor, ...at.next],
  )) as [string[], string[], string[], number, string, string[]]
  await releaseTtlHolds(client, keys, held)
  return { removed, handoffs: pairs(flat), at: { frontier, anchor, next } }
}

/** The hash of the job scheduler a run's id names (`last`: its pending run); the schedulers' set, not read, for any other id. */
function schedulerOf(keys: QueueKeys, id: string): string {
  const run = parseIteration(id)
  return run ? keys.scheduler(run.schedulerId) : keys.schedulers
}

/**
 * Releases the deduplication ids held with a ttl by jobs just removed (`held`: id, deduplication id, ...), as
 * BullMQ's remove does: a hold's key is named by its id, which only the removal read. A hold without a ttl
 * went with the removal; one another job holds now is left alone (unhold-2.lua).
 */
async function releaseTtlHolds(client: RedisClient, keys: QueueKeys, held: string[]): Promise<void> {
  const releases: Promise<number>[] = []
  for (let i = 0; i + 1 < held.length; i += 2) releases.push(unhold(client, keys, held[i + 1] as string, held[i] as string))
  await Promise.all(releases)
}

/** Where drain read the ids it passes. */
export type DrainSource = 'wait' | 'reserved' | 'prioritized' | 'delayed'

/**
 * Removes the given waiting (or delayed) jobs that are still where they were read; resolves to the ids
 * removed and the outbox entries of the flow children among them, to deliver (child id -> entry).
 */
export async function drain(
  client: RedisClient,
  keys: QueueKeys,
  source: DrainSource,
  ids: string[],
): Promise<{ removed: string[]; handoffs: [string, string][] }> {
  const [removed, flat, held] = (await evalScript(
    client,
    ADMIN_SCRIPTS.drain,
    [
      keys.wait,
      keys.reserved,
      keys.delayed,
      keys.marker,
      ...prioritizedKeys(keys),
      keys.handoffs,
      keys.meta,
      ...ids.flatMap((id) => [keys.job(id), keys.logs(id), ...flowKeys(keys, id)]),
    ],
    [source, ...ids],
  )) as [string[], string[], string[]]
  await releaseTtlHolds(client, keys, held)
  return { removed, handoffs: pairs(flat) }
}

/** Where obliterate read the ids it passes. */
export type ObliterateSource = 'wait' | 'reserved' | 'active' | 'prioritized' | 'delayed' | 'completed' | 'failed' | 'waiting-children'

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
  k.waitingChildren,
  k.handoffs,
  k.adding,
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
): Promise<{ status: 'active' | 'ok' | 'done' | 'more'; count: number; handoffs: [string, string][] }> {
  const ids = step?.ids ?? []
  const [status, count, flat] = (await evalScript(
    client,
    ADMIN_SCRIPTS.obliterate,
    [...queueOwnKeys(keys), ...ids.flatMap((id) => [keys.job(id), keys.lock(id), keys.logs(id), ...flowKeys(keys, id)])],
    [step ? 'jobs' : 'keys', force ? '1' : '0', step?.source ?? '', ...ids],
  )) as ['active' | 'ok' | 'done' | 'more', number, string[]?]
  // The workers' sweep throttle (stalled-check, a plain key with a PX) goes with the queue's keys.
  if (status === 'done') await client.del(keys.stalledCheck)
  return { status, count, handoffs: pairs(flat ?? []) }
}
