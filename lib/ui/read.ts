/**
 * What each page reads, and only that: every read is bounded by the page shown (a page of ids, then
 * those jobs; counts are ZCARD/LLEN), never a whole set and never a SCAN, so a queue with 100,000 failed
 * jobs costs a page what a queue with ten does. Jobs, counts and actions go through the library's Queue;
 * what only EchoMQ knows (a lease's time left, a sweep's mark, the chart's series, Redis's clock) comes
 * from lib/redis/queries.ts. The parts the CLI reads too (a queue's existence, counts and paused flag, a
 * state's jobs, leases) are lib/read-model.ts's. The overview reads the registry (one SMEMBERS of queue names) and then each
 * queue's counts, sent together (the client pipelines them).
 *
 * Queues are opened only when they exist (registered, or holding jobs): opening a Queue registers its
 * name, so a mistyped URL must not add a queue to the registry.
 */
import { type Clock, systemClock } from '../clock.js'
import type { Job, JobState } from '../job.js'
import { Queue, type QueueCounts } from '../queue.js'
import { jobsIn, type Lease, queueExists, queueState, readLeases, unknownQueueText } from '../read-model.js'
import type { RedisClient } from '../redis/connection.js'
import { queueKeys } from '../redis/keys.js'
import { finishedPerMinute, serverTimeMs } from '../redis/queries.js'
import { registeredQueues } from '../registry.js'
import { type Minute, sumSeries } from './chart.js'
import { DashboardError } from './errors.js'
import { readConnected, readHealth, readPresence } from './operator.js'
import type { WorkersPageData } from './operator-page.js'
import { type JobSchedulerView, schedulerViews } from './schedules.js'
import { readTiming, type Timing } from './timing.js'

/** The queues a dashboard shows: every registered one, or those it was given; each opened once. */
export class QueueSet {
  private readonly open = new Map<string, Queue>()

  constructor(
    readonly client: RedisClient,
    readonly prefix: string,
    private readonly allowed: string[] | undefined,
    /** What the reads kept a while (CLIENT LIST, operator.ts) are timed by; tests inject a manual one. */
    readonly clock: Pick<Clock, 'now'> = systemClock,
  ) {}

  async names(): Promise<string[]> {
    return this.allowed ?? registeredQueues(this.client, this.prefix)
  }

  /** A queue listed by names(): it exists. */
  known(name: string): Queue {
    let queue = this.open.get(name)
    if (!queue) {
      queue = new Queue(name, { connection: this.client, prefix: this.prefix })
      this.open.set(name, queue)
    }
    return queue
  }

  /** A queue named in a URL: 404 unless it is shown here and exists. `name` is validated by the caller. */
  async get(name: string): Promise<Queue> {
    const cached = this.open.get(name)
    if (cached) return cached
    if (this.allowed && !this.allowed.includes(name)) throw notFound(name, this.prefix)
    if (!this.allowed && !(await queueExists(this.client, this.prefix, name))) throw notFound(name, this.prefix)
    return this.known(name)
  }

  async close(): Promise<void> {
    await Promise.all([...this.open.values()].map((q) => q.close()))
  }
}

const notFound = (name: string, prefix: string) => new DashboardError('ERR_UI_NOT_FOUND', unknownQueueText(name, prefix))

export interface QueueRow {
  name: string
  counts: QueueCounts
  paused: boolean
  /** Workers connected (undefined: unknown, CLIENT LIST refused). */
  workers: number | undefined
}

export interface Overview {
  now: number
  rows: QueueRow[]
  /** Queues in all (the page shows `rows`). */
  total: number
  chart: Minute[]
}

export async function readOverview(set: QueueSet, start: number, size: number): Promise<Overview> {
  const all = await set.names()
  const names = all.slice(start, start + size)
  const [now, rows, series, presence] = await Promise.all([
    serverTimeMs(set.client),
    Promise.all(
      names.map(async (name): Promise<Omit<QueueRow, 'workers'>> => ({ name, ...(await queueState(set.client, set.prefix, name)) })),
    ),
    Promise.all(names.map((name) => finishedPerMinute(set.client, queueKeys(set.prefix, name)))),
    readConnected(set, names),
  ])
  return {
    now,
    rows: rows.map((r) => ({ ...r, workers: presence.connected.get(r.name) })),
    total: all.length,
    chart: sumSeries(series),
  }
}

/** A queue's wait and processing time per minute (timing.ts). */
export async function readTimingPage(set: QueueSet, name: string): Promise<{ now: number; name: string; timing: Timing }> {
  const queue = await set.get(name)
  const now = await serverTimeMs(set.client)
  return { now, name, timing: await readTiming(set.client, queue.keys, now) }
}

/** The workers page: every worker of the queues shown, and Redis's health. */
export async function readWorkersPage(set: QueueSet): Promise<WorkersPageData> {
  const names = await set.names()
  const now = await serverTimeMs(set.client)
  const [presence, health] = await Promise.all([readPresence(set, names, now), readHealth(set)])
  return { now, presence, health }
}

/** The states a queue page lists, in tab order. */
export const LISTED_STATES = ['active', 'wait', 'prioritized', 'delayed', 'failed', 'completed'] as const satisfies readonly JobState[]

/** The jobs a state's tab lists: the `active` tab lists the marked-stalled jobs too (counts() apart). */
export function listedCount(counts: QueueCounts, state: JobState): number {
  return state === 'active' ? counts.active + counts.stalled : counts[state]
}

export type { Lease }

export interface QueuePage {
  now: number
  name: string
  counts: QueueCounts
  paused: boolean
  state: JobState
  start: number
  jobs: Job[]
  /** For `active`: each job's lease, in order. */
  leases: Lease[]
  chart: Minute[]
  /** For `delayed`: the queue's job schedulers (the first 100, next due first); undefined on other pages. */
  schedulers: JobSchedulerView[] | undefined
  /** Workers connected (undefined: unknown, CLIENT LIST refused). */
  workers: number | undefined
}

export async function readQueuePage(set: QueueSet, name: string, state: JobState, start: number, size: number): Promise<QueuePage> {
  const queue = await set.get(name)
  const end = start + size - 1
  const [now, counts, paused, jobs, chart, schedulers, presence] = await Promise.all([
    serverTimeMs(set.client),
    queue.counts(),
    queue.isPaused(),
    listJobs(queue, state, start, end),
    finishedPerMinute(set.client, queue.keys),
    state === 'delayed' ? queue.getJobSchedulers(0, 99, true).then(schedulerViews) : Promise.resolve(undefined),
    readConnected(set, [name]),
  ])
  const leases =
    state === 'active'
      ? await readLeases(
          queue,
          jobs.map((j) => j.id),
        )
      : []
  return { now, name, counts, paused, state, start, jobs, leases, chart, schedulers, workers: presence.connected.get(name) }
}

/**
 * One page of a state. `wait` the last to run first (BullMQ's getJobs order: a job sent to the front, lifo
 * or recovered, comes last); the others as jobsIn (LIST_ORDER, the words `echomq jobs` prints too):
 * `completed` and `failed` the most recently finished first, `prioritized` in the order they will run,
 * `delayed` by due time and `active` by lease deadline, so the jobs due next and the leases that lapsed (a
 * dying worker's) come first.
 */
function listJobs(queue: Queue, state: JobState, start: number, end: number): Promise<Job[]> {
  if (state === 'wait') return queue.getJobs(['waiting', 'paused'], start, end, false)
  return jobsIn(queue, state, start, end - start + 1)
}

export interface JobPage {
  now: number
  name: string
  job: Job
  logs: { logs: string[]; count: number }
  logStart: number
  lease: Lease | undefined
  paused: boolean
}

export async function readJobPage(set: QueueSet, name: string, id: string, logStart: number, logSize: number): Promise<JobPage> {
  const queue = await set.get(name)
  const [now, job, logs, paused] = await Promise.all([
    serverTimeMs(set.client),
    queue.getJob(id),
    queue.getJobLogs(id, logStart, logStart + logSize - 1, false),
    queue.isPaused(),
  ])
  if (!job) throw new DashboardError('ERR_UI_NOT_FOUND', `no job "${id}" in queue "${name}"`)
  const lease = job.state === 'active' ? (await readLeases(queue, [id]))[0] : undefined
  return { now, name, job, logs, logStart, lease, paused }
}
