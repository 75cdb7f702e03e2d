/**
 * The state a crashed worker leaves behind: jobs taken with a lease that nobody renews. One builder for
 * the race, the benchmarks and the tests, on a `Redis` or a `Cluster` (every key of a queue is in one
 * slot). `holdJobs` takes jobs as a worker would (the take command, in batches); `buildCrashedState`
 * adds jobs, holds them with a short lease and waits until the leases have lapsed.
 */

import type { Retention } from '../../lib/job-options.js'
import { PREFIX_DEFAULT } from '../../lib/options.js'
import { Queue } from '../../lib/queue.js'
import { type Lease, take } from '../../lib/redis/commands.js'
import type { RedisClient } from '../../lib/redis/connection.js'
import { queueKeys } from '../../lib/redis/keys.js'
import { liveLeases, readCandidates } from '../../lib/redis/queries.js'

/** Jobs per add round and per take call: well under Redis's argument limits. */
const BATCH = 200

export interface HoldOptions {
  prefix?: string
  /** Lease of the taken jobs (ms). */
  leaseMs?: number
  /** The token of the (dead) worker holding the leases. */
  workerToken?: string
  /** The name recorded on the jobs (a stalled job's reason names it). */
  workerName?: string
}

/** Adds jobs with the given ids (job data `{ i }`), BATCH adds in flight at a time. */
export async function addJobs(
  client: RedisClient,
  queue: string,
  ids: string[],
  { prefix = PREFIX_DEFAULT, attempts = 3, removeOnFail }: { prefix?: string; attempts?: number; removeOnFail?: Retention } = {},
): Promise<void> {
  const q = new Queue(queue, { connection: client, prefix })
  const options = { attempts, ...(removeOnFail === undefined ? {} : { removeOnFail }) }
  for (let i = 0; i < ids.length; i += BATCH) {
    await Promise.all(ids.slice(i, i + BATCH).map((id, j) => q.add('job', { i: i + j }, { ...options, jobId: id })))
  }
  await q.close()
}

/** Takes `n` jobs from the tail of `wait` as a worker would, and returns their leases. */
export async function holdJobs(
  client: RedisClient,
  queue: string,
  n: number,
  { prefix = PREFIX_DEFAULT, leaseMs = 1, workerToken = 'dead-worker', workerName = 'dead-worker' }: HoldOptions = {},
): Promise<Lease[]> {
  const keys = queueKeys(prefix, queue)
  const held: Lease[] = []
  while (held.length < n) {
    const ids = await readCandidates(client, keys, Math.min(BATCH, n - held.length))
    if (ids.length === 0) throw new Error(`holdJobs: wait of ${queue} is empty after ${held.length} of ${n} jobs`)
    for (const { job, token } of (await take(client, keys, { workerToken, leaseMs, workerName }, ids)).taken)
      held.push({ id: job.id, token })
  }
  return held
}

/** Adds `n` jobs (ids `<idPrefix>0` ..) and takes them all with a lease that has lapsed on return. */
export async function buildCrashedState(
  client: RedisClient,
  queue: string,
  n: number,
  {
    leaseMs = 1,
    attempts = 3,
    prefix = PREFIX_DEFAULT,
    idPrefix = 'j',
    removeOnFail,
  }: { leaseMs?: number; attempts?: number; prefix?: string; idPrefix?: string; removeOnFail?: Retention } = {},
): Promise<string[]> {
  const keys = queueKeys(prefix, queue)
  const ids = Array.from({ length: n }, (_, i) => `${idPrefix}${i}`)
  await addJobs(client, queue, ids, { prefix, attempts, ...(removeOnFail === undefined ? {} : { removeOnFail }) })
  await holdJobs(client, queue, n, { prefix, leaseMs })
  const deadline = performance.now() + leaseMs + 5_000
  for (let i = 0; i < n; i += BATCH) {
    while ((await liveLeases(client, keys, ids.slice(i, i + BATCH))) > 0) {
      if (performance.now() > deadline) throw new Error('crashed leases did not expire')
      await new Promise((resolve) => setTimeout(resolve, Math.min(leaseMs, 20)))
    }
  }
  return ids
}
