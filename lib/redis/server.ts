/**
 * The server itself: its clock, its eviction policy, a ping, and the per-minute metrics read by its clock.
 */
import type { RedisClient } from './connection.js'
import type { QueueKeys } from './keys.js'

/** Redis's clock (ms), which due times, finish times and lease deadlines are stamped with. */
export async function serverTimeMs(client: RedisClient): Promise<number> {
  const [seconds = 0, micros = 0] = await client.time()
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
}

/** The server's maxmemory-policy (CONFIG GET), undefined when the reply names none. */
export async function evictionPolicy(client: RedisClient): Promise<string | undefined> {
  return ((await client.call('CONFIG', 'GET', 'maxmemory-policy')) as string[])[1]
}

/** Completed and failed jobs in each of the last 60 minutes (oldest first) by Redis's clock, from `metrics`. */
export async function finishedPerMinute(
  client: RedisClient,
  keys: QueueKeys,
): Promise<{ minute: number; completed: number; failed: number }[]> {
  const [hash, now] = await Promise.all([client.hgetall(keys.metrics), serverTimeMs(client)])
  const current = Math.floor(now / 60_000)
  return Array.from({ length: 60 }, (_, i) => {
    const minute = current - 59 + i
    return { minute, completed: Number(hash[`c${minute}`] ?? 0), failed: Number(hash[`f${minute}`] ?? 0) }
  })
}

/** Resolves once the connection answers. */
export async function ping(client: RedisClient): Promise<void> {
  await client.ping()
}
