/**
 * Adding jobs: `add` and `addBulk` store jobs and push them on `wait` (or on `delayed`, with a `delay`)
 * in one script; an existing `jobId` returns the job already stored and changes nothing. Every job is
 * validated and encoded before any Redis call, so a rejected call changes nothing.
 */
import { batchesOf } from '../batches.js'
import { EchoMQError } from '../errors.js'
import { type FlowSettings, type ParentRefOption, parentFields } from '../flows/options.js'
import { Job } from '../job.js'
import { addSettings, type JobOptions } from '../job-options.js'
import { jobOpts } from '../job-opts.js'
import { toJson } from '../json.js'
import { validateJobName, validateNewJobId } from '../options.js'
import * as commands from '../redis/commands.js'
import { encodeBackoff, encodeKeep } from '../redis/job-codec.js'
import { queueKeys } from '../redis/keys.js'
import { jobExists } from '../redis/queries.js'
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
  if (job.flow?.parent) return addChild(q, job, job.flow.parent, data)
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
 * then they go in calls of at most BULK_JOBS_PER_CALL jobs and 1 MiB of data, sent in one MULTI.
 * Resolves to the jobs in the order given (an existing `jobId`: the job already stored).
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
    const job = newJob(q, o.name, o.data, o.opts)
    if (job.flow?.parent) fail('ERR_OPTIONS', `addBulk job ${i}: a job with a parent is added with add(), or in a flow (FlowProducer)`)
    return job
  })
  const out = await q.call('add to queue', () => addAll(q, jobs, news))
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
    id: jobId === undefined ? '' : validateNewJobId(jobId),
    name,
    data: toJson(data, 'job data', q.settings.maxDataBytes, 'maxDataBytes'),
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
 * A child added to an existing job (BullMQ's `parent` option): its key joins the parent's dependencies
 * first (adoptChild-3.lua; no such parent: ERR_JOB_MISSING, nothing written), then the child is written in
 * this queue with its parent's fields (addFlow-10.lua), so it can never end before its parent counts it.
 */
async function addChild(q: QueueCore, job: commands.NewJob & { flow?: FlowSettings }, parent: ParentRefOption, data: unknown) {
  const parentKeys = queueKeys(parent.prefix, parent.queue)
  const missing = () =>
    new EchoMQError('ERR_JOB_MISSING', `Missing key for parent job ${parentKeys.job(parent.id)}: job not added to queue ${q.name}`)
  if (job.id === '') {
    const inHand = q.ids.takeNow(1)
    // Reserving ids writes the queue's counter (meta): a call refused for its missing parent writes nothing,
    // so the parent is looked for first. Gone between the look and the adoption, it leaves ids reserved only.
    if (!inHand && !(await q.call('add to queue', () => jobExists(q.client, parentKeys, parent.id)))) throw missing()
    job.id = (inHand ?? (await q.call('add to queue', () => q.ids.take(1))))[0] as string
  }
  const childKey = q.keys.job(job.id)
  const adopted = await q.call('add to queue', () => commands.adoptChildren(q.client, parentKeys, parent.id, [childKey]))
  if (!adopted) throw missing()
  const fields = parentFields(parent, job.flow?.policy)
  const node = { ...job, ...fields, children: [] }
  const { createdOn, codes } = await q.call('add to queue', () => commands.addFlowNodes(q.client, q.keys, [[node]]))
  await q.call('add to queue', () => commands.doneAdding(q.client, parentKeys, [parent.id]))
  if (codes[0] === 'refused') {
    const drop = { parentId: parent.id, childKey, outcome: 'removed' as const, value: '' }
    await q.call('add to queue', () => commands.settleChildren(q.client, parentKeys, [drop]))
    throw new EchoMQError('ERR_JOB_STATE', `The parent of job ${job.id} of queue ${q.name} cannot be replaced: it keeps the parent it has`)
  }
  if (codes[0] === 'existed') return stored(q, job.id)
  const out = announce(q, added(q, job, data, createdOn))
  out.parentKey = fields.parentKey
  out.parent = JSON.parse(fields.parent)
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
