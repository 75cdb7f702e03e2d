/**
 * The queue registry: every Queue and Worker adds its queue's name to `<prefix>:queues`, so the reaper
 * sweeps a new queue without being redeployed. A live Queue or Worker registers again at most once a
 * minute (REGISTRATION_REFRESH_MS), so a registry lost to a Redis restart without persistence, a
 * failover or a deleted key is restored within a minute, at the cost of one SADD a minute. Registering is
 * best effort: a failure never fails the call that triggered it, and is tried again sooner.
 */
import type { RedisClient } from './redis/connection.js'
import { addToRegistry } from './redis/queries.js'

/** How often a live Queue or Worker registers again. */
export const REGISTRATION_REFRESH_MS = 60_000
/** After a failed registration, the next try (a broken registry key must not cost every call). */
const RETRY_AFTER_MS = 10_000

export { addToRegistry as registerQueue, registryMembers as registeredQueues } from './redis/queries.js'

/**
 * Returns `ensure()`: registers the queue when the last registration is REGISTRATION_REFRESH_MS old (or
 * failed RETRY_AFTER_MS ago). Resolves with the error of an attempt that failed (for the caller to
 * report), undefined otherwise; never rejects. `now` is a monotonic clock (ms).
 */
export function registration(client: RedisClient, prefix: string, queue: string, now: () => number): () => Promise<unknown> {
  let due = Number.NEGATIVE_INFINITY
  // Called on every add: between refreshes it returns at once, with no promise of its own.
  const fresh = Promise.resolve(undefined)
  return () => {
    const at = now()
    if (at < due) return fresh
    due = at + REGISTRATION_REFRESH_MS
    return addToRegistry(client, prefix, queue).then(
      () => undefined,
      (err: unknown) => {
        due = at + RETRY_AFTER_MS
        return err
      },
    )
  }
}
