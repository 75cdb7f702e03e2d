/**
 * Adding jobs: `add` and `addBulk` store jobs and push them on `wait` (or on `delayed`, with a `delay`)
 * in one script; an existing `jobId` returns the job already stored and changes nothing. Every job is
 * validated and encoded before any Redis call, so a rejected call changes nothing.
 */
import { batchesOf } from '../batches.js'
import { EchoMQError } from '../errors.js'
import { type FlowSettings, type ParentRefOption, parentFields } from '../flows/options.js'
import type { PlannedNode } from '../flows/tree.js'
import { writeFlows } from '../flows/writing.js'
import { Job } from '../job.js'
import { addSettings, type JobOptions } from '../job-options.js'
import { jobOpts } from '../job-opts.js'
import { toJson } from '../json.js'
import { validateJobName, validateNewJobId } from '../options.js'
import * as commands from '../redis/commands.js'
import { encodeBackoff, encodeKeep, withFlowFields } from '../redis/job-codec.js'
import { queueKeys } from '../redis/keys.js'
import { checkKnown, describe, fail } from '../validate.js'
import type { QueueCore } from './core.js'
import { getJob } from './getters.js'
import { addedOption } from './job-scope.js'

/** Most jobs, and bytes of job data, in one script call of addBulk (all calls of one addBulk go in one MULTI). */
const BULK_JOBS_PER_CALL = 200
const BULK_BYTES_PER_CALL = commands.TAKE_MAX_BYTES
/** Most jobs one addBulk takes: the whole bulk is one transaction, which holds Redis while it runs. */
const MAX_BULK_JOBS = 100_000
/** Rounds of fresh ids addBulk tries for generated ids that were taken before it gives up. */
const ID_ROUNDS = 5

/** A job for addBulk, as BullMQ takes it. */
export interface BulkJob<Data = unknown, Name extends string = string> {
  name: Name
  data: Data
  opts?: JobOptions
}

/** Adds a job; an existing `jobId` resolves to the job already stored, unchanged. */
export async function add(q: QueueCore, name: unknown, data: unknown, options: unknown): Promise<Job> {
  q.assertOpen()
  // addBulk of one, without its arrays: the path every producer takes for every job.
  const job = newJob(q, name, data, options)
  if (job.flow?.parent) return (await addChildren(q, [{ job, data }]))[0] as Job
  const generated = job.id === ''
  void q.register()
  for (let round = 0, needId = generated; ; round++) {
    if (needId) job.id = (q.ids.takeNow(1) ?? (await q.call('add to queue', () => q.ids.take(1))))[0] as string
    needId = false
    q.known.guess([job])
    const reply = await q.call('add to queue', () => commands.add(q.client, q.keys, [job]))
    learn(q, job, reply, 0)
    if (reply.added[0]) return announce(q, added(q, job, data, reply.createdOn))
    // Deduplicated: as BullMQ's add, the job asked for under the holder's id (no read: one round trip).
    const holder = reply.heldBy[0]
    if (holder !== undefined) return added(q, { ...job, id: holder }, data, reply.createdOn)
    if (round + 1 === ID_ROUNDS) {
      const what = reply.stale[0] !== undefined ? 'the holder of its deduplication id changed' : 'generated job ids were taken'
      throw new EchoMQError('ERR_SCRIPT', `queue ${q.name}: ${ID_ROUNDS} times in a row, ${what}`)
    }
    // Its deduplication id has another holder than the one expected: sent again, expecting that one.
    if (reply.stale[0] !== undefined) continue
    // A generated id that is taken (the counter was reset while jobs remained) gets the next one.
    if (!generated) break
    needId = true
  }
  return stored(q, job.id)
}

/**
 * Adds jobs all or none: each is validated first (a bad one rejects the call and nothing is written),
 * then they go in calls of at most BULK_JOBS_PER_CALL jobs and 1 MiB of data, sent in one MULTI. Jobs
 * with `opts.parent` (BullMQ's addBulk takes them) go first, as add's do (addChildren): a missing parent
 * rejects the call before any job is written. Resolves to the jobs in the order given (an existing
 * `jobId`: the job already stored).
 */
export async function addBulk(q: QueueCore, jobs: BulkJob[]): Promise<Job[]> {
  q.assertOpen()
  if (!Array.isArray(jobs) || jobs.length > MAX_BULK_JOBS) {
    const got = Array.isArray(jobs) ? `an array of ${jobs.length} jobs` : describe(jobs)
    fail('ERR_OPTIONS', `expected addBulk to be given an array of at most ${MAX_BULK_JOBS} jobs, got: ${got}`)
  }
  if (jobs.length === 0) return []
  const news = jobs.map((j, i) => {
    const o = checkKnown(`addBulk job ${i}`, j, ['name', 'data', 'opts'])
    try {
      return newJob(q, o.name, o.data, o.opts)
    } catch (err) {
      // Which job of the bulk: the error alone does not say.
      if (!(err instanceof EchoMQError)) throw err
      const { variable, hint } = err
      throw new EchoMQError(err.code, `addBulk job ${i}: ${err.message}`, {
        ...(variable === undefined ? {} : { variable }),
        ...(hint === undefined ? {} : { hint }),
      })
    }
  })
  // Children of existing jobs (opts.parent) first: a missing parent refuses the call before any job is written.
  const parented = news.flatMap((job, i) => (job.flow?.parent ? [i] : []))
  const rest = news.flatMap((job, i) => (job.flow?.parent ? [] : [i]))
  const out: (Job | undefined)[] = []
  if (parented.length > 0) {
    const children = await addChildren(
      q,
      parented.map((i) => ({ job: news[i] as commands.NewJob, data: jobs[i]?.data })),
    )
    for (const [k, i] of parented.entries()) out[i] = children[k]
  }
  if (rest.length > 0) {
    const added = await q.call('add to queue', () =>
      addAll(
        q,
        rest.map((i) => jobs[i] as BulkJob),
        rest.map((i) => news[i] as commands.NewJob),
      ),
    )
    for (const [k, i] of rest.entries()) out[i] = added[k]
  }
  // An existing custom jobId: the job already stored.
  for (const [i, j] of news.entries()) out[i] ??= await stored(q, j.id)
  return out as Job[]
}

type Pending = { job: commands.NewJob; index: number; generated: boolean }[]

/** The jobs of addBulk, sent until each is added, deduplicated, or found stored under its custom id. */
async function addAll(q: QueueCore, jobs: BulkJob[], news: commands.NewJob[]): Promise<(Job | undefined)[]> {
  const out: (Job | undefined)[] = []
  const unnamed = news.filter((j) => j.id === '')
  const fresh = await q.ids.take(unnamed.length)
  for (const [i, j] of unnamed.entries()) j.id = fresh[i] as string
  void q.register()
  const generated = new Set(unnamed)
  let pending: Pending = news.map((job, index) => ({ job, index, generated: generated.has(job) }))
  // A generated id that is taken (the counter was reset while jobs remained) gets the next one; a job
  // whose deduplication id changed holder since it was read is sent again.
  for (let round = 0; pending.length > 0; round++) {
    if (round === ID_ROUNDS) throw new EchoMQError('ERR_SCRIPT', `queue ${q.name}: ${ID_ROUNDS} generated job ids in a row were taken`)
    q.known.guess(pending.map((p) => p.job))
    const calls = bulkCalls(pending)
    const replies = await commands.addAll(
      q.client,
      q.keys,
      calls.map((c) => c.map((p) => p.job)),
    )
    const retry: Pending = []
    const taken: Pending = []
    for (const [c, reply] of replies.entries()) {
      for (const [i, p] of (calls[c] as Pending).entries()) {
        const holder = reply.heldBy[i]
        const data = jobs[p.index]?.data
        learn(q, p.job, reply, i)
        if (reply.added[i]) out[p.index] = announce(q, added(q, p.job, data, reply.createdOn))
        else if (holder !== undefined) out[p.index] = added(q, { ...p.job, id: holder }, data, reply.createdOn)
        else if (reply.stale[i] !== undefined) retry.push(p)
        else if (p.generated) taken.push(p)
      }
    }
    const again = await q.ids.take(taken.length)
    for (const [i, p] of taken.entries()) p.job.id = again[i] as string
    pending = [...retry, ...taken]
  }
  return out
}

/** Jobs in calls of at most BULK_JOBS_PER_CALL jobs and BULK_BYTES_PER_CALL bytes of data. */
function bulkCalls<T extends { job: commands.NewJob }>(jobs: T[]): T[][] {
  return batchesOf(jobs, { count: BULK_JOBS_PER_CALL, bytes: BULK_BYTES_PER_CALL }, (j) => j.job.data.length)
}

/** The job stored under an existing custom id. */
async function stored(q: QueueCore, id: string): Promise<Job> {
  const existing = await getJob(q, id)
  if (!existing) throw new EchoMQError('ERR_SCRIPT', `job ${id} in queue ${q.name} vanished while being added`)
  return existing
}

/** A job of add or addBulk, validated and encoded; id '' for EchoMQ to give. */
function newJob(q: QueueCore, jobName: unknown, data: unknown, options: unknown): commands.NewJob & { flow?: FlowSettings } {
  const name = validateJobName(jobName)
  const {
    jobId,
    attempts,
    delay,
    backoff,
    removeOnComplete,
    removeOnFail,
    keepLogs,
    priority,
    lifo,
    stackTraceLimit,
    deduplication,
    flow,
  } = addSettings(options, q.settings.defaultJobOptions)
  return {
    ...(flow.parent ? { flow } : {}),
    ...(deduplication ? { deduplication: { spec: deduplication, holder: null } } : {}),
    // BullMQ stores a job added without data as {}.
    id: jobId === undefined ? '' : validateNewJobId(jobId),
    name,
    data: data === undefined ? '{}' : toJson(data, 'job data', q.settings.maxDataBytes, 'maxDataBytes'),
    attempts,
    delayMs: delay,
    backoff: encodeBackoff(backoff),
    keep: encodeKeep(removeOnComplete),
    keepFailed: encodeKeep(removeOnFail),
    keepLogs,
    priority,
    lifo,
    stackTraceLimit,
  }
}

/**
 * Jobs added as children of existing jobs (BullMQ's `parent` option, on add or addBulk), written as a
 * flow's roots are (lib/flows/writing.ts): each child's key joins its parent's dependencies first
 * (adoptChild-4.lua), then the children are written in this queue with their parents' fields
 * (addFlow-10.lua), so none can end before its parent counts it; parents in other slots are other calls.
 * A missing parent refuses the call with nothing written: when ids must be reserved for the children (a
 * write to the queue's counter), or several parents are named, the parents are looked for first; a lone
 * parent with its child's id at hand is checked by the adoption itself. Resolves to the jobs in order.
 */
async function addChildren(q: QueueCore, children: { job: commands.NewJob & { flow?: FlowSettings }; data: unknown }[]) {
  const parentOf = (job: commands.NewJob & { flow?: FlowSettings }) => job.flow?.parent as ParentRefOption
  const parentKeys = [...new Set(children.map(({ job }) => queueKeys(parentOf(job).prefix, parentOf(job).queue).job(parentOf(job).id)))]
  const unnamed = children.filter(({ job }) => job.id === '')
  const inHand = q.ids.takeNow(unnamed.length)
  if (parentKeys.length > 1 || (unnamed.length > 0 && !inHand)) {
    const exist = await q.call('add to queue', () => commands.jobsExist(q.client, parentKeys))
    const missing = parentKeys.find((_, i) => !exist[i])
    if (missing !== undefined)
      throw new EchoMQError('ERR_JOB_MISSING', `Missing key for parent job ${missing}: no job added to queue ${q.name}`)
  }
  const ids = inHand ?? (await q.call('add to queue', () => q.ids.take(unnamed.length)))
  for (const [i, { job }] of unnamed.entries()) job.id = ids[i] as string
  const nodes: PlannedNode[] = children.map(({ job, data }) => ({
    prefix: q.settings.prefix,
    queue: q.name,
    depth: 0,
    data,
    children: [],
    args: { ...job, ...parentFields(parentOf(job), job.flow?.policy), children: [] },
    attachTo: parentOf(job),
  }))
  const written = await q.call('add to queue', () => writeFlows(q.client, nodes, nodes))
  const out: Job[] = []
  for (const [i, n] of nodes.entries()) {
    const { job, data } = children[i] as (typeof children)[number]
    const w = written.get(n)
    if (w?.code !== 'added') out.push(await stored(q, job.id))
    else {
      const child = added(q, job, data, w.createdOn)
      // Its parentKey, parent and their options in job.opts (parent, the failure policy), as a read gives them.
      withFlowFields(child, n.args.parentKey, n.args.parent)
      out.push(announce(q, child))
    }
  }
  return out
}

/** The Job add returns for a job it added: what was stored, without a read. */
function added(q: QueueCore, j: commands.NewJob, data: unknown, createdOn: number): Job {
  const opts = jobOpts(j.id, createdOn, j.attempts, (f) => addedOption(j, f))
  const fields = { id: j.id, name: j.name, data, attempts: j.attempts, attemptsMade: 0, attemptsStarted: 0, createdOn, opts }
  const state =
    j.delayMs > 0
      ? { state: 'delayed' as const, dueAt: createdOn + j.delayMs }
      : { state: j.priority > 0 ? ('prioritized' as const) : ('wait' as const) }
  const dedup = j.deduplication ? { deduplicationId: j.deduplication.spec.id } : {}
  return new Job({ ...fields, ...state, ...(j.priority > 0 ? { priority: j.priority } : {}), ...dedup }, q.scope)
}

/** What an add call said of the holder of job i's deduplication id, kept for the next add of that id. */
function learn(q: QueueCore, job: commands.NewJob, reply: commands.AddResult, i: number): void {
  const id = job.deduplication?.spec.id
  if (id === undefined) return
  const stale = reply.stale[i]
  if (stale !== undefined) q.known.learn(id, stale)
  else if (reply.added[i]) q.known.learn(id, job.id)
  else if (reply.heldBy[i] !== undefined) q.known.learn(id, reply.heldBy[i] as string)
}

/** Emits `waiting` for a job this Queue added (BullMQ's QueueListener). */
function announce(q: QueueCore, job: Job): Job {
  q.emitter.emit('waiting', job)
  return job
}
