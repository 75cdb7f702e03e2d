/** Queue states for tests: the one builder in cli/support/crashed-state.ts, under the names the tests use. */
export { addJobs, buildCrashedState as crashedJobs, holdJobs } from '../../cli/support/crashed-state.js'

import type { RedisClient } from '../../lib/redis/connection.js'
import { queueKeys } from '../../lib/redis/keys.js'
import type { QueuesFixture } from './fixture.js'
import { waitFor } from './wait.js'

/**
 * Marks jobs as stalled once before (stalledCounter 1): with the default maxStalledCount (1) their next
 * stall fails them, as a stall on the last attempt did when a stall used an attempt. Returns the ids.
 */
export async function stalledBefore(client: RedisClient, queue: string, ids: string[], prefix = 'emq'): Promise<string[]> {
  for (const id of ids) await client.hset(queueKeys(prefix, queue).job(id), 'stalledCounter', '1')
  return ids
}

/** Adds `n` jobs of one attempt each to `queue` and lets a worker of the fixture fail them all ("boom"). */
export async function failJobs(queues: QueuesFixture, queue: string, n: number): Promise<void> {
  const q = queues.open(queue)
  const before = (await q.counts()).failed
  for (let i = 0; i < n; i++) await q.add('job', { i }, { attempts: 1 })
  const failing = queues.worker(queue, () => Promise.reject(new Error('boom')))
  try {
    await waitFor(async () => (await q.counts()).failed === before + n, { timeoutMs: 10_000, what: `${n} failed jobs` })
  } finally {
    await failing.close()
  }
}
