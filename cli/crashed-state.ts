/**
 * Builds the state a crashed worker leaves behind: `n` jobs taken with a lease nobody renews, already
 * expired. Used by `echomq race` and by the tests.
 */
import type { Redis } from 'ioredis'
import { Queue } from '../lib/index.js'
import { queueKeys } from '../lib/keys.js'
import { runScript, scripts } from '../lib/scripts.js'

const BATCH = 200

export async function buildCrashedState(
  client: Redis,
  queue: string,
  n: number,
  { leaseMs = 1, attempts = 3, prefix = 'emq', idPrefix = 'j' } = {},
): Promise<string[]> {
  const q = new Queue(queue, { connection: client, prefix })
  const keys = queueKeys(prefix, queue)
  const ids = Array.from({ length: n }, (_, i) => `${idPrefix}${i}`)
  for (let i = 0; i < n; i += BATCH) {
    await Promise.all(ids.slice(i, i + BATCH).map((id, j) => q.add('job', { i: i + j }, { attempts, jobId: id })))
  }
  for (let taken = 0; taken < n; ) {
    const batch = (await client.lrange(keys.wait, -BATCH, -1)).reverse()
    if (batch.length === 0) break
    const reply = (await runScript(client, scripts.take(), [keys.wait, keys.active, keys.marker, ...batch.flatMap((id) => [keys.job(id), keys.lock(id)])], [
      'dead-worker',
      leaseMs,
      ...batch,
    ])) as unknown[]
    taken += reply.length
  }
  const deadline = Date.now() + leaseMs + 5_000
  for (let i = 0; i < n; i += 500) {
    const locks = ids.slice(i, i + 500).map((id) => keys.lock(id))
    while ((await client.exists(...locks)) > 0) {
      if (Date.now() > deadline) throw new Error('crashed leases did not expire')
      await new Promise((resolve) => setTimeout(resolve, Math.min(leaseMs, 20)))
    }
  }
  return ids
}
