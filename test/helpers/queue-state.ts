/** Builds queue states directly with the library's scripts: jobs taken by a worker that then died. */
import type { Redis } from 'ioredis'
import { queueKeys } from '../../lib/keys.js'
import { runScript, scripts } from '../../lib/scripts.js'
import { Queue } from '../../lib/index.js'
import { waitFor } from './wait.js'

/** Adds `n` jobs and takes them all with a lease of `leaseMs` that nobody renews (a crashed worker). */
export async function crashedJobs(client: Redis, queue: string, n: number, { leaseMs = 1, attempts = 3, prefix = 'emq' } = {}): Promise<string[]> {
  const q = new Queue(queue, { connection: client, prefix })
  const ids: string[] = []
  for (let i = 0; i < n; i++) ids.push((await q.add('job', { i }, { attempts, jobId: `j${i}` })).id)
  const keys = queueKeys(prefix, queue)
  for (let i = 0; i < ids.length; i += 100) {
    const batch = (await client.lrange(keys.wait, -100, -1)).reverse()
    await runScript(client, scripts.take(), [keys.wait, keys.active, keys.marker, ...batch.flatMap((id) => [keys.job(id), keys.lock(id)])], ['dead-worker', leaseMs, ...batch])
  }
  await waitFor(async () => (await client.exists(...ids.map((id) => keys.lock(id)))) === 0, { what: 'crashed leases to expire' })
  return ids
}
