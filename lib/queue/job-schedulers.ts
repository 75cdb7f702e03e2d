/**
 * A Queue's job schedulers (BullMQ's upsertJobScheduler, getJobScheduler, getJobSchedulers,
 * getJobSchedulersCount, removeJobScheduler); lib/schedulers/ keeps them in Redis.
 */
import type { Job } from '../job.js'
import { validateJobId } from '../options.js'
import { schedulerCount } from '../redis/queries.js'
import {
  getScheduler,
  type JobScheduler,
  type JobTemplate,
  listSchedulers,
  type RepeatOptions,
  removeScheduler,
  upsertScheduler,
} from '../schedulers/schedulers.js'
import { checkRank, type QueueCore } from './core.js'
import { getJob } from './getters.js'

/**
 * Creates or changes job scheduler `id` (BullMQ's upsertJobScheduler): `repeat` is { every } (ms; the
 * first run at once) or { pattern } (cron, in `tz`), with limit, startDate, endDate, immediately, offset;
 * `template` is { name, data, opts } of the jobs it makes. Resolves to the first run's job, or undefined
 * when there is none (past its endDate). Upserting the same timing again keeps the schedule and its
 * newest run (new template), so no run is duplicated.
 */
export async function upsertJobScheduler(
  q: QueueCore,
  id: string,
  repeat: RepeatOptions,
  template?: JobTemplate,
): Promise<Job | undefined> {
  q.assertOpen()
  const { defaultJobOptions, maxDataBytes } = q.settings
  void q.register()
  const first = await q.call('upsert a job scheduler of queue', () =>
    upsertScheduler(q.client, q.keys, id, repeat, template ?? {}, defaultJobOptions, maxDataBytes),
  )
  return first === undefined ? undefined : ((await getJob(q, first)) ?? undefined)
}

/** Job scheduler `id`, undefined when there is none. */
export async function getJobScheduler(q: QueueCore, id: string): Promise<JobScheduler | undefined> {
  q.assertOpen()
  validateJobId(id)
  return q.call('read a job scheduler of queue', () => getScheduler(q.client, q.keys, id))
}

/** Job schedulers by when their next period is due (`asc`: soonest first); ranks as in Redis. */
export async function getJobSchedulers(q: QueueCore, start: number, end: number, asc: boolean): Promise<JobScheduler[]> {
  q.assertOpen()
  checkRank('start', start)
  checkRank('end', end)
  return q.call('list the job schedulers of queue', () => listSchedulers(q.client, q.keys, start, end, asc === true))
}

export async function getJobSchedulersCount(q: QueueCore): Promise<number> {
  q.assertOpen()
  return q.call('count the job schedulers of queue', () => schedulerCount(q.client, q.keys))
}

/** Removes job scheduler `id` and its newest run if no worker started it; resolves to whether there was one. */
export async function removeJobScheduler(q: QueueCore, id: string): Promise<boolean> {
  q.assertOpen()
  return q.call('remove a job scheduler of queue', () => removeScheduler(q.client, q.keys, id))
}
