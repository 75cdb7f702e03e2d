/** `echomq stats` and `echomq inspect`: read-only views of queues. */
import type { RedisClient } from '../lib/connection.js'
import { jobFromHash } from '../lib/job.js'
import { queueKeys } from '../lib/keys.js'
import { type QueueCounts, queueCounts } from '../lib/queue.js'
import { registeredQueues } from '../lib/registry.js'

export async function stats(client: RedisClient, prefix: string, queues: string[] | undefined): Promise<Record<string, QueueCounts>> {
  const names = queues ?? (await registeredQueues(client, prefix))
  const out: Record<string, QueueCounts> = {}
  for (const q of names) out[q] = await queueCounts(client, queueKeys(prefix, q), q)
  return out
}

export interface InFlight {
  id: string
  name: string
  leaseMsLeft: number | null
  marked: boolean
  attemptsMade: number
  attempts: number
}

export interface FailedJob {
  id: string
  name: string
  failedReason: string
  attemptsMade: number
  finishedOn: number | null
}

export interface Inspection {
  counts: QueueCounts
  inFlight: InFlight[]
  failed: FailedJob[]
}

/** The `limit` in-flight jobs with the earliest lease deadlines, and the `limit` most recent failures. */
export async function inspect(client: RedisClient, prefix: string, queue: string, limit: number): Promise<Inspection> {
  const keys = queueKeys(prefix, queue)
  const counts = await queueCounts(client, keys, queue)
  const inFlight: InFlight[] = []
  for (const id of await client.zrange(keys.active, '0', String(limit - 1))) {
    const [ttl, markedAt, hash] = await Promise.all([
      client.pttl(keys.lock(id)),
      client.zscore(keys.stalled, id),
      client.hgetall(keys.job(id)),
    ])
    const job = jobFromHash(id, hash)
    inFlight.push({
      id,
      name: job.name,
      leaseMsLeft: ttl > 0 ? ttl : null,
      marked: markedAt !== null,
      attemptsMade: job.attemptsMade,
      attempts: job.attempts,
    })
  }
  const failed: FailedJob[] = []
  for (const id of await client.zrevrange(keys.failed, '0', String(limit - 1))) {
    const job = jobFromHash(id, await client.hgetall(keys.job(id)))
    failed.push({
      id,
      name: job.name,
      failedReason: job.failedReason ?? '',
      attemptsMade: job.attemptsMade,
      finishedOn: job.finishedOn ?? null,
    })
  }
  return { counts, inFlight, failed }
}
