/**
 * What a Queue does to one job, or to chosen jobs, by id: progress and log lines (unfenced: no run owns
 * the job here), retryJobs, promoteJob, remove and removeJob. Inputs are validated before any Redis call.
 */

import { EchoMQError } from '../errors.js'
import { deliverHandoffs } from '../flows/handoffs.js'
import { removeJob as removeFlowJob } from '../flows/removal.js'
import type { Job, JobState } from '../job.js'
import type { JobProgress } from '../listeners.js'
import { flag, validateJobId } from '../options.js'
import type { RetrySet } from '../redis/commands.js'
import * as commands from '../redis/commands.js'
import { firstDelayed, readJob } from '../redis/queries.js'
import { parseIteration, promoteIterationNow } from '../schedulers/iterations.js'
import { checkInteger, checkKnown, describe, fail, opt } from '../validate.js'
import type { QueueCore } from './core.js'
import { MAX_JOBS_PER_CALL } from './getters.js'

/** Jobs sent back per script call when retryJobs walks `failed` or `completed`. */
const RETRY_BATCH = 100
/**
 * Most ids one retryJobs call of completed jobs names: all go in one script call (all or nothing), and each
 * may bring two keys more (its deduplication id's hold and that hold's holder), well under Redis's 3,999
 * arguments a call.
 */
const MAX_COMPLETED_IDS = 500
/** Most times one batch is sent again with what the script asked for: each answer asks only for what changed since. */
const NEED_ROUNDS = 4

/** Records a job's progress (a `progress` event here and in QueueEvents), as BullMQ's updateJobProgress. */
export async function updateJobProgress(q: QueueCore, jobId: string, progress: JobProgress): Promise<void> {
  q.assertOpen()
  validateJobId(jobId)
  await q.scope.updateProgress({ id: jobId } as Job, progress, undefined)
}

/** Appends a line to a job's log (BullMQ's addJobLog); the job's own keepLogs bounds it. */
export async function addJobLog(q: QueueCore, jobId: string, logRow: string): Promise<number> {
  q.assertOpen()
  validateJobId(jobId)
  return q.scope.log({ id: jobId } as Job, logRow, undefined)
}

/** retryJobs' options: EchoMQ's `ids` or `limit`, BullMQ 6.7's `count`, `state` and `timestamp`, and `resetAttemptsMade`. */
export interface RetryJobsOptions {
  ids?: string[]
  limit?: number
  /** BullMQ's: jobs per script call (every job is retried); EchoMQ sends RETRY_BATCH a call whatever it is. */
  count?: number
  /** BullMQ's: the jobs retried, 'failed' (the default) or 'completed'. */
  state?: RetrySet
  /** BullMQ's: only jobs that finished at or before this time (ms since the epoch). */
  timestamp?: number
  /** A fresh attempts budget (the dashboard's and the CLI's retry); BullMQ keeps attemptsMade. */
  resetAttemptsMade?: boolean
}

/**
 * Sends failed (or, with `state: 'completed'`, completed) jobs back to `wait`, keeping their history (a
 * failure's error in `lastError`, all runs in `attemptsStarted`) and, as BullMQ's, their attemptsMade (a
 * job that used its attempts runs once more) unless `resetAttemptsMade`. `ids`: those jobs, every one of
 * which must be in that state and may be retried (else ERR_JOB_STATE and nothing changes); otherwise the
 * oldest (finished by `timestamp`), at most `limit` (all), those that may not be retried left where they
 * are. A completed job may not be retried when its deduplication id is held by another job, or when it is a
 * flow's child whose parent moved on (lua/retry-8.lua). Resolves to the ids moved.
 */
export async function retryJobs(q: QueueCore, options?: RetryJobsOptions): Promise<string[]> {
  q.assertOpen()
  const o = checkKnown('retryJobs', options, ['ids', 'limit', 'count', 'state', 'timestamp', 'resetAttemptsMade'])
  if (o.ids !== undefined && (o.limit !== undefined || o.timestamp !== undefined))
    fail('ERR_OPTIONS', 'retryJobs takes ids, or limit and timestamp, not both')
  const set = opt(o.state, 'failed', (v): RetrySet => {
    if (v !== 'failed' && v !== 'completed') fail('ERR_OPTIONS', `expected state to be 'failed' or 'completed', got: ${describe(v)}`)
    return v
  })
  opt(o.count, 0, (v) => checkInteger('count', v, { min: 1, max: Number.MAX_SAFE_INTEGER }))
  const fresh = opt(o.resetAttemptsMade, false, flag('resetAttemptsMade'))
  if (o.ids !== undefined) return retryNamed(q, set, o.ids, fresh)
  const limit = opt(o.limit, Number.POSITIVE_INFINITY, (v) => checkInteger('limit', v, { min: 1, max: Number.MAX_SAFE_INTEGER }))
  const before = opt(o.timestamp, Number.POSITIVE_INFINITY, (v) => checkInteger('timestamp', v, { min: 0, max: Number.MAX_SAFE_INTEGER }))
  return retryOldest(q, set, limit, before, fresh)
}

/** The jobs of `ids`, every one of which must be in `set` and may be retried (else ERR_JOB_STATE and nothing changes). */
async function retryNamed(q: QueueCore, set: RetrySet, given: unknown, fresh: boolean): Promise<string[]> {
  const most = set === 'completed' ? MAX_COMPLETED_IDS : MAX_JOBS_PER_CALL
  if (!Array.isArray(given) || given.length === 0 || given.length > most) {
    fail('ERR_OPTIONS', `expected ids to be an array of 1-${most} job ids, got: ${describe(given)}`)
  }
  const ids = [...new Set(given.map((id) => validateJobId(id)))]
  return (await retryBatch(q, { set, ids, strict: true, maxScore: Number.POSITIVE_INFINITY, fresh })).moved
}

interface RetryCall {
  set: RetrySet
  ids: string[]
  strict: boolean
  maxScore: number
  fresh: boolean
}

/**
 * One script call's jobs retried (lua/retry-8.lua), sent again with what it asks for before it retries
 * completed jobs: the keys of their deduplication ids' holds, and whether a flow child's parent still waits
 * for children (the parent may be in another slot: read here). A child whose parent moved on is refused
 * (strict) or left in `completed`. Resolves to the ids moved and those left in the set.
 */
async function retryBatch(q: QueueCore, call: RetryCall): Promise<{ moved: string[]; left: string[] }> {
  const known: commands.RetryKnown = { deduplicationIds: [], holders: [], checkedParents: [] }
  const left: string[] = []
  let ids = call.ids
  for (let round = 0; ids.length > 0; round++) {
    const reply = await q.call(`retry ${call.set} jobs of queue`, async () => {
      const r = await commands.retry(q.client, q.keys, { ...call, ids, known })
      if (r.status === 'ok') await tellParents(q, r.handoffs)
      return r
    })
    if (reply.status === 'ok') return { moved: reply.moved, left: [...left, ...reply.refused] }
    if (reply.status !== 'need') throw refusal(q, call.set, reply)
    if (round === NEED_ROUNDS) {
      // Named ids: all or none. A walk of the set leaves these where they are, and goes on.
      if (!call.strict) return { moved: [], left: [...left, ...ids] }
      throw new EchoMQError(
        'ERR_JOB_STATE',
        `the completed jobs of queue ${q.name} kept changing while they were retried; retry them again`,
      )
    }
    for (const need of reply.needs) {
      // Each key once, however many rounds ask for it: a call's arguments stay bounded.
      const { deduplicationId: deid, holder } = need
      if (deid !== undefined && !known.deduplicationIds.includes(deid)) known.deduplicationIds.push(deid)
      if (holder !== undefined && holder !== need.id && !known.holders.includes(holder)) known.holders.push(holder)
    }
    const movedOn = await parentsMovedOn(q, reply.needs, known)
    if (call.strict && movedOn.length > 0) throw childRefusal(q, movedOn[0] as ParentMovedOn)
    left.push(...movedOn.map((m) => m.id))
    ids = ids.filter((id) => !movedOn.some((m) => m.id === id))
  }
  return { moved: [], left }
}

interface ParentMovedOn {
  id: string
  parentKey: string
  state: string
}

/**
 * Of the children a retry asked about, those whose parents moved on from `waiting-children`: the parent ran,
 * or runs, with the child's result, so the child may not be retried. The others (a parent still waiting,
 * or gone) are added to `known.checkedParents`.
 */
async function parentsMovedOn(q: QueueCore, needs: commands.RetryNeed[], known: commands.RetryKnown): Promise<ParentMovedOn[]> {
  const children = needs.filter((n): n is commands.RetryNeed & { parentKey: string } => n.parentKey !== undefined)
  if (children.length === 0) return []
  const states = await q.call('read the parents of jobs of queue', () =>
    commands.statesOf(
      q.client,
      children.map((c) => c.parentKey),
    ),
  )
  const movedOn: ParentMovedOn[] = []
  children.forEach((child, i) => {
    const state = states[i]
    if (state === undefined || state === 'waiting-children') known.checkedParents.push(child.id)
    else movedOn.push({ id: child.id, parentKey: child.parentKey, state })
  })
  return movedOn
}

/** A retry refused by retry-8.lua (not in the set, missing, or its deduplication id held by another job). */
function refusal(q: QueueCore, set: RetrySet, reply: commands.RetryReply): EchoMQError {
  if (reply.status === 'not-in' && reply.state === 'missing')
    return new EchoMQError('ERR_JOB_MISSING', `job ${reply.id} of queue ${q.name} does not exist; nothing was retried`)
  if (reply.status === 'not-in')
    return new EchoMQError('ERR_JOB_STATE', `job ${reply.id} of queue ${q.name} is ${reply.state}, not ${set}; nothing was retried`)
  const held = reply as Extract<commands.RetryReply, { status: 'held' }>
  return new EchoMQError(
    'ERR_JOB_STATE',
    `job ${held.id} of queue ${q.name}: its deduplication id ${JSON.stringify(held.deduplicationId)} is held by job ${held.holder}, ` +
      'which would run beside it; nothing was retried (let that job finish, or release the id: removeDeduplicationKey)',
  )
}

function childRefusal(q: QueueCore, child: ParentMovedOn): EchoMQError {
  return new EchoMQError(
    'ERR_JOB_STATE',
    `job ${child.id} of queue ${q.name} is a flow's child whose parent ${child.parentKey} is ${child.state}, no longer waiting for ` +
      'children: it has run, or runs, with this result, and would never wait for another; nothing was retried (add a new job)',
  )
}

/**
 * A flow's children retried are their parents' pending dependencies again (lib/flows/handoffs.ts): told
 * before the call resolves, as BullMQ's retry changes the parent in the same step.
 */
async function tellParents(q: QueueCore, handoffs: [string, string][]): Promise<void> {
  if (handoffs.length > 0) await deliverHandoffs(q.client, q.keys, handoffs)
}

/**
 * The oldest jobs of `set` that finished by `before` (ms), at most `limit`: a batch a call, walked by score
 * (the jobs left in the set stepped over, so a trim of its oldest meanwhile moves no job past the walk).
 */
async function retryOldest(q: QueueCore, set: RetrySet, limit: number, before: number, fresh: boolean): Promise<string[]> {
  // Only the jobs finished when the call began, each once: with workers failing them again meanwhile (the
  // downstream is still down), re-reading the set from its start would send them back over and over.
  const newest = await q.call(`retry ${set} jobs of queue`, () => commands.newestScore(q.client, q.keys, set))
  if (newest === undefined) return []
  // A score is the finish's ms (plus a fraction, in `failed`): a job that finished at `before` scores under before + 1.
  const maxScore = Math.min(Number(newest), before + 1 - 2 ** -12)
  const moved = new Set<string>()
  // Where the walk is: a score, and how many jobs at that score it stepped over (left, or retried and
  // finished again within the same millisecond as `maxScore`: still in range, not retried twice).
  let at = { min: '-inf', skip: 0 }
  while (moved.size < limit) {
    const n = Math.min(RETRY_BATCH, limit - moved.size)
    const read = await q.call(`retry ${set} jobs of queue`, () => commands.finishedFrom(q.client, q.keys, set, at, String(maxScore), n))
    if (read.length === 0) break
    const again = new Set(read.filter(([id]) => moved.has(id)).map(([id]) => id))
    const ids = read.filter(([id]) => !again.has(id)).map(([id]) => id)
    const done = ids.length === 0 ? { moved: [], left: [] } : await retryBatch(q, { set, ids, strict: false, maxScore, fresh })
    for (const id of done.moved) moved.add(id)
    const left = new Set(done.left)
    at = stepOver(at, read, (id) => again.has(id) || left.has(id))
  }
  return [...moved]
}

/** The walk's place after `read`: its last score, and how many jobs at that score stay in the set (`stays`). */
function stepOver(at: { min: string; skip: number }, read: [string, string][], stays: (id: string) => boolean) {
  const last = (read[read.length - 1] as [string, string])[1]
  const stayed = read.filter(([id, score]) => score === last && stays(id)).length
  return { min: last, skip: (last === at.min ? at.skip : 0) + stayed }
}

/**
 * Moves a delayed job (a delayed add, or a retry waiting its backoff) to the back of `wait` now, due or
 * not (BullMQ's job.promote()). ERR_JOB_MISSING when there is no such job, ERR_JOB_STATE when it is not
 * delayed; nothing changes then.
 */
export async function promoteJob(q: QueueCore, id: string): Promise<void> {
  q.assertOpen()
  validateJobId(id)
  const outcome = await q.call('promote a job of queue', () => promoteOne(q, id))
  if (outcome === 'missing') throw new EchoMQError('ERR_JOB_MISSING', `job ${id} of queue ${q.name} does not exist: nothing promoted`)
  if (outcome !== 'promoted')
    throw new EchoMQError('ERR_JOB_STATE', `job ${id} of queue ${q.name} is ${outcome}, not delayed: nothing promoted`)
}

/** Promotes a delayed job: 'promoted', else the state it is in ('missing' when there is none). */
async function promoteOne(q: QueueCore, id: string): Promise<string> {
  if (!parseIteration(id)) return commands.promoteJob(q.client, q.keys, id)
  // A scheduler's pending run moves its schedule on as it leaves `delayed`, as when it falls due.
  if (await promoteIterationNow(q.client, q.keys, id)) return 'promoted'
  return ((await readJob(q.client, q.keys, id)).state as JobState | undefined) ?? 'missing'
}

/**
 * Every delayed job to `wait` now, due or not (BullMQ's promoteJobs): `count` at a time (1,000, each its
 * own script call, sent together), until none is left.
 */
export async function promoteJobs(q: QueueCore, opts?: unknown): Promise<void> {
  q.assertOpen()
  const o = checkKnown('promoteJobs', opts, ['count'])
  const count = opt(o.count, MAX_JOBS_PER_CALL, (v) => checkInteger('count', v, { min: 1, max: MAX_JOBS_PER_CALL }))
  // Ids that stay delayed (not promotable, or left meanwhile) are stepped over: the walk ends at the set's end.
  for (let skip = 0; ; ) {
    const ids = await q.call('read the delayed jobs of queue', () => firstDelayed(q.client, q.keys, count, skip))
    if (ids.length === 0) return
    const outcomes = await q.call('promote the delayed jobs of queue', () => Promise.all(ids.map((id) => promoteOne(q, id))))
    skip += outcomes.filter((o) => o !== 'promoted').length
  }
}

/**
 * Removes a job that is not in flight, with its log, as BullMQ's remove: resolves to 1, or to 0 when the
 * job, or a pending job of its tree (`removeChildren`, the default), is in flight (BullMQ: locked) and
 * nothing was removed. An id with no job resolves to 1, as in BullMQ (nothing was locked); `removed` is
 * emitted on this Queue for a 1. A job whose lease lapsed (no sweep recovered it yet) is not in flight: it
 * is removed, as BullMQ removes an active job whose lock is gone. A job scheduler's pending run is refused
 * (ERR_JOB_STATE, as BullMQ throws). removeJob says more.
 */
export async function remove(q: QueueCore, id: string, opts?: { removeChildren?: boolean }): Promise<0 | 1> {
  const o = checkKnown('remove', opts, ['removeChildren'])
  const outcome = await removeOutcome(q, id, o.removeChildren !== false)
  if (outcome === 'active' || outcome === 'tree-active') return 0
  if (outcome === 'scheduler') throw schedulerRun(q, id)
  q.emitter.emit('removed', id)
  return 1
}

/** EchoMQ's remove: whether there was such a job; ERR_JOB_ACTIVE (nothing removed) for one in flight, or a tree with one. */
export async function removeJob(q: QueueCore, id: string): Promise<boolean> {
  const outcome = await removeOutcome(q, id)
  if (outcome === 'active') throw new EchoMQError('ERR_JOB_ACTIVE', `job ${id} of queue ${q.name} is in flight; it was not removed`)
  if (outcome === 'tree-active')
    throw new EchoMQError('ERR_JOB_ACTIVE', `job ${id} of queue ${q.name} has a job of its tree in flight; nothing was removed`)
  if (outcome === 'scheduler') throw schedulerRun(q, id)
  if (outcome === 'removed') q.emitter.emit('removed', id)
  return outcome === 'removed'
}

/** A job scheduler's pending run, refused by remove as BullMQ's ("belongs to a job scheduler"). */
function schedulerRun(q: QueueCore, id: string): EchoMQError {
  const sid = parseIteration(id)?.schedulerId
  return new EchoMQError(
    'ERR_JOB_STATE',
    `Job ${id} belongs to a job scheduler and cannot be removed directly. remove (queue ${q.name}: ` +
      `removeJobScheduler('${sid}') removes it with its schedule)`,
  )
}

async function removeOutcome(q: QueueCore, id: string, removeChildren = true): Promise<Awaited<ReturnType<typeof removeFlowJob>>> {
  q.assertOpen()
  validateJobId(id)
  return q.call('remove a job of queue', () => removeFlowJob(q.client, q.keys, id, removeChildren))
}
